"""Score a run's stored outputs again, as a new run (``evalhydra rejudge``, :func:`evalhydra.rejudge`).

Re-judging separates judge variance from generation variance: the outputs a
run stored are matched again (judges really are called; the candidate service
never is) and the new verdicts are stored as a **new run** whose
``runs.parent_run_id`` is the original. Re-judge the same run several times to
sample the judge; re-judge a re-judge to chain changes.

How the config is rebuilt: the original run's ``runs.overrides`` plus the new
overrides (a new value for a key replaces the original's) are composed with
:func:`evalhydra.compose.compose.compose_config` and validated by
:func:`evalhydra.plan.build.build_plan`, so ``matcher=includes``,
``eval.matcher.case_sensitive=false``, ``judge_service=NAME`` … work as for a
run, and an unknown judge fails before any call. Relative paths in the stored
overrides (``registry=…``) resolve against the current directory.

The cells run through the runner (:func:`evalhydra.execute.runner.execute_cells`)
with the stored outputs as their source (:mod:`evalhydra.execute.rejudge_cell`), and the
run ends through :func:`evalhydra.job.run.finish_job`.
Only evals present in the re-composed config are re-judged (``eval=…`` narrows
the selection); ``trials=`` has no effect: every stored output is judged once.
Agent runs are refused: their trials are judged by each case's ``validator.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio

from evalhydra.analysis.targetstats import TargetStats
from evalhydra.compose.compose import compose_config
from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError
from evalhydra.execute.rejudge_cell import RejudgeTally, open_rejudge_runner, rejudge_jobs
from evalhydra.execute.runner import RunOutcome, execute_cells
from evalhydra.execute.runrecord import new_run_id, run_row
from evalhydra.job.exit_codes import ExitCode
from evalhydra.job.run import finish_job, preflight
from evalhydra.plan.build import build_plan
from evalhydra.plan.model import RunPlan
from evalhydra.store.db import Store, open_store

__all__ = ["RejudgeResult", "merge_overrides", "override_key", "rejudge"]


@dataclass
class RejudgeResult:
    """What a re-judge did: the new run, the runner's outcome, the re-judge counts, the exit code."""

    run_id: str
    outcome: RunOutcome
    tally: RejudgeTally
    exit_code: ExitCode
    stats: list[TargetStats]


def rejudge(store_path: str | Path, run_id: str, overrides: Sequence[str] = (), *,
            out: Path | None = None) -> RejudgeResult:
    """Re-judge the stored outputs of ``run_id`` as a new run, finished as a run is.

    The new run's reports, summary, gates, exit code and ``runs.exit_code`` come from
    :func:`evalhydra.job.run.finish_job`, as a run's do; the judge services pass the
    same pre-flight checks.

    Args:
        store_path: The SQLite store holding the run (the new run goes there too).
        run_id: The run to re-judge: a full id, a unique prefix, or ``latest``.
        overrides: Hydra overrides applied on top of the run's own, e.g.
            ``["matcher=includes"]`` or ``["judge_service=mock_judge"]``.
        out: The report directory (default: ``<store dir>/runs/<new run id>``).

    Raises:
        EvalHydraError: Unknown run, invalid config or judge (before any call).
    """
    path = Path(store_path).expanduser().resolve()
    if not path.exists():
        raise EvalHydraError(f"No store at {path}.", "Pass --store PATH.")
    store = open_store(path)
    try:
        parent = _parent_run(store, run_id)
        merged = merge_overrides(_stored_overrides(parent), overrides)
        plan = build_plan(compose_config([*merged, f"store.path={path}"]), merged)
        preflight(plan)
        new_id = new_run_id(plan, prefix="eval-rejudge")
        tally = RejudgeTally(parent_run_id=parent["run_id"])
        jobs = rejudge_jobs(store, plan, new_id, tally)
        if not jobs:
            selected = ", ".join(e.id for e in plan.evals)
            raise EvalHydraError(
                f"Run '{parent['run_id']}' has no results of the evals selected ({selected}).")
        row = _run_row(plan, new_id, len(jobs), parent, merged)
        outcome = trio.run(partial(execute_cells, plan, store, row, jobs,
                                   partial(open_rejudge_runner, plan, new_id, tally)))
        job = finish_job(plan, store, outcome, out or path.parent / "runs" / new_id,
                         resume_hint="the new run is incomplete; rejudge again for a complete one")
        return RejudgeResult(run_id=new_id, outcome=outcome, tally=tally, exit_code=job.exit_code,
                             stats=job.stats)
    finally:
        store.close()


def merge_overrides(original: Iterable[str], new: Iterable[str]) -> list[str]:
    """The original overrides, minus those whose key a new override sets, then the new ones.

    Keys compare without Hydra's ``+``/``++``/``~`` prefixes, so
    ``["matcher=exact_match", "trials=2"] + ["matcher=includes"]`` gives
    ``["trials=2", "matcher=includes"]``.
    """
    new = list(new)
    replaced = {override_key(o) for o in new}
    return [o for o in original if override_key(o) not in replaced] + new


def override_key(override: str) -> str:
    """An override's key without Hydra's ``+``/``++``/``~`` prefixes (``+a.b=1`` → ``a.b``)."""
    return override.partition("=")[0].lstrip("+~").strip()


def _parent_run(store: Store, given: str) -> dict[str, Any]:
    parent = store.runs(store.resolve_run_ids([given]))[0]
    if parent.get("kind") == "agent":
        raise EvalHydraError(
            f"Run '{parent['run_id']}' is an agent run; rejudge scores stored chat outputs.",
            "Agent trials are judged by their case's validator.py, not by a matcher.")
    return parent


def _stored_overrides(run: dict[str, Any]) -> list[str]:
    raw = run.get("overrides")
    try:
        value = strictjson.loads_plain(raw) if isinstance(raw, str) else (raw or [])
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EvalHydraError(f"Run '{run['run_id']}' has unreadable overrides {raw!r}.")
    return [v for v in value if not v.endswith("=<redacted>")]  # secrets were never stored


def _run_row(plan: RunPlan, run_id: str, total: int, parent: dict[str, Any],
             overrides: list[str]) -> dict[str, Any]:
    row = run_row(replace(plan, overrides=tuple(overrides)), run_id, total)
    row.update(kind=parent.get("kind") or row["kind"], parent_run_id=parent["run_id"])
    return row
