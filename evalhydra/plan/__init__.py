"""The plan: a composed config validated into frozen objects, and the cells it enumerates.

* :mod:`~evalhydra.plan.model`: :class:`~evalhydra.plan.model.RunPlan` and
  :class:`~evalhydra.plan.model.EvalPlan`.
* :mod:`~evalhydra.plan.build`: :func:`~evalhydra.plan.build.build_plan`, every
  check that must pass before the first call.
* :mod:`~evalhydra.plan.cells`: cell keys and the stream of cells to run.
* :mod:`~evalhydra.plan.placement`: settings that act in one place only (the judge's own, the
  built-in mock's), refused where they would do nothing.
"""
