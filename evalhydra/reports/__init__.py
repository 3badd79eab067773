"""Reports: files and terminal text written from what :mod:`evalhydra.analysis` computes.

* :mod:`~evalhydra.reports.writer`: writes a run's (or a sweep's) artifacts, each atomically
  (:mod:`~evalhydra.reports.atomic`: a temp file in the target's directory, then ``os.replace``).
* :mod:`~evalhydra.reports.zig`: zig_eval's text report; :mod:`~evalhydra.reports.streams`,
  :mod:`~evalhydra.reports.aiwg`, :mod:`~evalhydra.reports.junit`: per-result files streamed
  from SQLite (zig_eval's JSON, aiwg's JSONL, JUnit).
* :mod:`~evalhydra.reports.markdown`, :mod:`~evalhydra.reports.trials`: report.md / summary.md and
  trials.json (:mod:`~evalhydra.reports.markdown_cases` holds report.md's per-case sections,
  :mod:`~evalhydra.reports.mdcells` its escaped cells and tables);
  :mod:`~evalhydra.reports.html`: ``report.html``, one self-contained page per run, sweep or
  comparison; :mod:`~evalhydra.reports.openai_shape`: a run in the OpenAI Evals API's
  shapes (the ``openai`` format).
* :mod:`~evalhydra.reports.zrb`, :mod:`~evalhydra.reports.zrb_markdown`: zrb-llm-evaluator's
  results.json, experiment.json and report.md.
* :mod:`~evalhydra.reports.summary`: the one-screen terminal summary and the gates' lines;
  :mod:`~evalhydra.reports.sweepsummary`: the end of a sweep on one screen.
* The commands' text: :mod:`~evalhydra.reports.comparison` (``compare``),
  :mod:`~evalhydra.reports.power` (``power``), :mod:`~evalhydra.reports.calibration`
  (``calibrate``).
"""
