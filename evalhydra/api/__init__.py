"""The Python API: run and re-judge evals from code (pytest, notebooks) exactly as the command line does.

* :mod:`~evalhydra.api.code_evals`: evals defined in Python
  (:class:`~evalhydra.api.code_evals.Eval`), written as an eval file and run like one.

Example:
    >>> import evalhydra  # doctest: +SKIP
    >>> result = evalhydra.evaluate(["eval=smoke"], trials=3)  # doctest: +SKIP
    >>> assert result.ok, result.stats  # doctest: +SKIP
    >>> again = evalhydra.rejudge(result.run_id, ["matcher=includes"])  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from evalhydra.api.code_evals import Eval, code_eval_overrides, service_overrides
from evalhydra.compose.hydra_errors import compose_explained
from evalhydra.config.defaults import DEFAULT_STORE_PATH
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode
from evalhydra.job.rejudge import rejudge as rejudge_run
from evalhydra.job.run import run_job
from evalhydra.plan.build import build_plan
from evalhydra.store.db import open_store

__all__ = ["Eval", "EvalHydraError", "EvalResult", "evaluate", "rejudge"]


@dataclass
class EvalResult:
    """The outcome of :func:`evaluate`.

    Attributes:
        run_id: The stored run (None for a dry run).
        exit_code: What the command line would exit with (0 ok, 1 a gate failed,
            3 nothing could be measured, 130 interrupted).
        stats: Per eval × service × model: ``n``, ``passed``, ``errors``, ``scored``,
            ``pass_rate`` (the mean over cases of each case's pass fraction), ``ci_low``,
            ``ci_high`` (its 95% interval), ``ci_method`` (``wilson``, or ``case-clustered
            wilson`` when trials repeat cases), ``n_cases``, ``pass_hat_k`` and its ``k``,
            latency, tokens, cost; for a target a judge scored, once the store holds labels
            (or a judge gate is set), the judge's fields and the pass rate corrected for its
            errors (``judge``, ``judge_labels``, ``judge_kappa``, ``corrected_pass_rate``,
            ``corrected_ci_low``, ``corrected_ci_high``, ``corrected_ci_method``,
            ``corrected_problem``; docs/uncertainty.md).
        store_path: The SQLite store holding the results.
    """

    run_id: str | None
    exit_code: int
    stats: list[dict[str, Any]] = field(default_factory=list)
    store_path: Path | None = None

    @property
    def ok(self) -> bool:
        """True when the run measured and every gate passed."""
        return self.exit_code == ExitCode.OK

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every result row of the run (``results`` columns), read from the store."""
        if self.run_id is None or self.store_path is None:
            return
        store = open_store(self.store_path, read_only=True)
        try:
            yield from store.run_rows([self.run_id])
        finally:
            store.close()


def evaluate(overrides: Sequence[str] | Eval = (), /, **options: Any) -> EvalResult:
    """Compose a config as the command line does, run it, and return its result.

    Args:
        overrides: Hydra overrides, e.g. ``["service=vllm", "eval=smoke"]``, or an
            :class:`~evalhydra.api.code_evals.Eval` defined in code (as ``eval=`` is too).
        **options: More overrides as keywords; ``__`` stands for a dot
            (``trials=3``, ``run__fail_under=0.9``, ``store__path="x.db"``).
            ``eval=`` may be an :class:`Eval`, ``service=`` a service's config (a dict with
            its ``name``, or a ``ServiceConfig``). ``run.progress`` is off unless set.

    Returns:
        The run id, exit code, per-target stats and a way to read the rows.

    Raises:
        EvalHydraError: A configuration problem, before any call.

    Works from a plain function, a pytest test, and inside a running event loop
    (a Jupyter cell): then the run goes to a worker thread, because trio cannot
    run on a thread whose asyncio loop is running.
    """
    code_eval = overrides if isinstance(overrides, Eval) else options.pop("eval", None)
    service = options.pop("service", None)
    items = [*([] if isinstance(overrides, Eval) else overrides),
             *(f"{key.replace('__', '.')}={_value(v)}" for key, v in options.items())]
    if isinstance(service, str):
        items.append(f"service={service}")
    elif service is not None:
        items += service_overrides(service, items)
    if isinstance(code_eval, Eval):
        items += code_eval_overrides(code_eval, items)
    elif code_eval is not None:
        items.append(f"eval={_value(code_eval)}")
    if not any(item.split("=", 1)[0].lstrip("+~") == "run.progress" for item in items):
        items.append("run.progress=false")
    if _in_event_loop():
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(_evaluate, items).result()
    return _evaluate(items)


def rejudge(run_id: str, overrides: Sequence[str] = (), /, *, store: str | Path = DEFAULT_STORE_PATH,
            out: str | Path | None = None) -> EvalResult:
    """Score a stored run's outputs again as a new run, as ``evalhydra rejudge`` does.

    Args:
        run_id: The run to re-judge: a full id, a unique prefix, or ``latest``.
        overrides: Hydra overrides on top of the run's own, e.g. ``["matcher=includes"]``.
        store: The SQLite store holding the run (the new run goes there too).
        out: The report directory (default: ``<store dir>/runs/<new run id>``).

    Returns:
        The new run's id, exit code and per-target stats.

    Raises:
        EvalHydraError: An unknown run, an invalid config or judge (before any call).
    """
    result = rejudge_run(store, run_id, overrides, out=Path(out) if out is not None else None)
    return EvalResult(run_id=result.run_id, exit_code=result.exit_code,
                      stats=[s.as_dict() for s in result.stats],
                      store_path=Path(store).expanduser().resolve())


def _evaluate(items: list[str]) -> EvalResult:
    plan = build_plan(compose_explained(items), items)
    job = run_job(plan)
    return EvalResult(run_id=job.run_id, exit_code=job.exit_code, stats=[s.as_dict() for s in job.stats],
                      store_path=plan.store_path)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    try:
        trio.lowlevel.current_trio_token()
        return True
    except RuntimeError:
        return False
