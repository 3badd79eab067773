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
"""
