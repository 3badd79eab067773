"""Analysis: the SQL over the store that produces figures and verdicts, apart from how they are
written. It imports only :mod:`evalhydra.store`, :mod:`evalhydra.stats` and :mod:`evalhydra.core`
(and nothing that renders: no tabulate, Jinja2, markdown-it, rich, web server, HTTP or Hydra);
:mod:`evalhydra.reports`, the viewer, the jobs and the command line read it.

* :mod:`~evalhydra.analysis.selection`: which results a report covers, as SQL.
* :mod:`~evalhydra.analysis.aggregate`, :mod:`~evalhydra.analysis.evalstats`: per target, per
  case and per level aggregates; :mod:`~evalhydra.analysis.zigstats`: zig_eval's stats objects and
  percentiles.
* :mod:`~evalhydra.analysis.runsummary`: a run's saved summary (totals, case histograms, graders);
  :mod:`~evalhydra.analysis.targetstats`: the per-target figures (pass rate with its interval,
  pass^k, latency, cost, the judge's fields); :mod:`~evalhydra.analysis.gates`: the CI gates and
  the targets under them; :mod:`~evalhydra.analysis.runfacts`: error reasons, failing cases,
  reused results, wall time.
* :mod:`~evalhydra.analysis.graders`: OpenAI Evals criteria per target;
  :mod:`~evalhydra.analysis.ttft`: time to first token.
* :mod:`~evalhydra.analysis.judges`, :mod:`~evalhydra.analysis.calibration`: each judge against
  people's labels, and the pass rates corrected for it.
* :mod:`~evalhydra.analysis.queues`: what the queues of items marked by hand share (the label queue,
  the simulator audit).
* :mod:`~evalhydra.analysis.simulator_audit`: the simulator audit's queue, and each agent's pass
  rate corrected for its simulated user's errors.
* :mod:`~evalhydra.analysis.simulators`: which simulated user played each side of a comparison,
  and what differs between them.
* :mod:`~evalhydra.analysis.compare`: case-paired comparisons;
  :mod:`~evalhydra.analysis.baselines`: the report's baselines over a selection;
  :mod:`~evalhydra.analysis.comparison`: ``evalhydra compare``'s targets and result;
  :mod:`~evalhydra.analysis.judgecompare`: its judge-corrected difference;
  :mod:`~evalhydra.analysis.samplesize`: ``evalhydra power``'s cases needed.
* :mod:`~evalhydra.analysis.wire_symptoms`: signs in a run's tool loops that the server broke a
  tool call (the probe's faults, as the run's replies show them).
* :mod:`~evalhydra.analysis.data`: everything a run's report documents hold, in one pass.
"""
