"""Reports, statistics and comparisons, computed from the store in SQL.

* :mod:`~evalhydra.reports.writer`: writes a run's (or a sweep's) artifacts.
* :mod:`~evalhydra.reports.selection`: which results a report covers, as SQL.
* :mod:`~evalhydra.reports.evalstats`, :mod:`~evalhydra.reports.aggregate`,
  :mod:`~evalhydra.reports.data`: aggregates (per target, per case, capped trials).
* :mod:`~evalhydra.reports.zig`: zig_eval's JSON and text artifacts.
* :mod:`~evalhydra.reports.streams`, :mod:`~evalhydra.reports.aiwg`,
  :mod:`~evalhydra.reports.junit`: per-result files streamed from SQLite.
* :mod:`~evalhydra.reports.markdown`, :mod:`~evalhydra.reports.trials`:
  report.md / summary.md and trials.json.
* :mod:`~evalhydra.reports.compare`, :mod:`~evalhydra.reports.comparecmd`: paired
  comparisons (baselines and ``evalhydra compare``).
* :mod:`~evalhydra.reports.summary`: the terminal summary and the CI gates.
* :mod:`~evalhydra.reports.atomic`: atomic file writes: a temp file in the target's directory, then
  ``os.replace``.
* :mod:`~evalhydra.reports.calibration`: ``evalhydra calibrate``: each judge against people's
  labels, and the corrected pass rates.
* :mod:`~evalhydra.reports.graders`: per-criterion figures of OpenAI Evals suites
  (``openai_graders``).
* :mod:`~evalhydra.reports.html`: ``report.html``: one self-contained page per run, sweep or
  comparison.
* :mod:`~evalhydra.reports.judgecompare`: ``compare --judge-corrected``: the paired difference of
  pass rates corrected for each side's judge.
* :mod:`~evalhydra.reports.judges`: each judge of some runs measured against people's labels, and
  the pass rates it gave corrected.
* :mod:`~evalhydra.reports.openai_shape`: a run in the OpenAI Evals API's shapes (the ``openai``
  report format).
* :mod:`~evalhydra.reports.powercmd`: ``evalhydra power``: how many cases × trials a comparison
  needs to catch a drop.
* :mod:`~evalhydra.reports.runsummary`: a run's summary: per eval × service × model totals, case
  histograms, grader figures.
* :mod:`~evalhydra.reports.sweepsummary`: the end of a sweep on one screen: pass rates, intervals
  and the comparison with the baseline.
* :mod:`~evalhydra.reports.ttft`: time to first token per target: what a user of a streamed answer
  waits for.
* :mod:`~evalhydra.reports.zrb`: zrb-llm-evaluator's artifacts from the store: results.json,
  experiment.json, report.md pieces.
* :mod:`~evalhydra.reports.zrb_markdown`: zrb-llm-evaluator 0.1.13's ``report.md``, rendered from an
  ``experiment.json`` document.
"""
