"""The plan: a composed config validated into frozen objects, and the cells it enumerates.

* :mod:`~evalhydra.plan.model`: :class:`~evalhydra.plan.model.RunPlan` and
  :class:`~evalhydra.plan.model.EvalPlan`.
* :mod:`~evalhydra.plan.build`: :func:`~evalhydra.plan.build.build_plan`, every
  check that must pass before the first call.
* :mod:`~evalhydra.plan.cells`: cell keys and the stream of cells to run.
* :mod:`~evalhydra.plan.placement`: settings that act in one place only (the judge's own, the
  built-in mock's), refused where they would do nothing.
* :mod:`~evalhydra.plan.files`: matcher files named by an eval in evalhydra's own format, placed
  where they were written.
* :mod:`~evalhydra.plan.preflight`: the checks that run just before the first call, after the plan
  is built.
* :mod:`~evalhydra.plan.selection`: which cases of each eval a run sends (``run.limit``,
  ``run.cases``, ``run.tags``, …).
* :mod:`~evalhydra.plan.tools`: an eval's tool loop as it will run: which tools run and how, and the
  loop's limits, checked.
* :mod:`~evalhydra.plan.services`: the services a run calls besides the one under test (judges,
  simulated users), read from the service files.
* :mod:`~evalhydra.plan.users`: an eval's simulated user as it will run: who plays it, its
  instructions, how it stops, checked.
"""
