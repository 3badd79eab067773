"""One job end to end, the same for the command line, the Python API and ``rejudge``.

* :mod:`~evalhydra.job.run`: plan → pre-flight checks → run → store → reports →
  summary → gates → exit code; :func:`~evalhydra.job.run.finish_job` is the one finish.
* :mod:`~evalhydra.job.rejudge`: score a stored run's outputs again as a new run,
  finished through the same code.
* :mod:`~evalhydra.job.exit_codes`: :class:`~evalhydra.job.exit_codes.ExitCode`.
* :mod:`~evalhydra.job.diagnose`: the one-line fixes, and whether a run measured anything.
* :mod:`~evalhydra.job.dry_run`: ``run.dry_run=true``.
* :mod:`~evalhydra.job.judged`: each judged eval's judge as measured before a run (its verdicts'
  telemetry events carry it).

This package prints (the summary, warnings) but never reads argv: that is :mod:`evalhydra.cli`.

* :mod:`~evalhydra.job.probe`: ``evalhydra probe tools``: probe a run's service, store the checks,
  the exit code.
* :mod:`~evalhydra.job.check`: ``evalhydra check``: is every endpoint of a run there, and does it
  answer, before a long run?
"""
