"""``evalhydra rejudge RUN_ID [OVERRIDES...]``: score a run's stored outputs again.

Re-judging separates judge variance from generation variance: the outputs a
run stored are matched again (judges really are called; the candidate service
never is) and the new verdicts are stored as a **new run** whose
``runs.parent_run_id`` is the original. Re-judge the same run several times to
sample the judge; re-judge a re-judge to chain changes.

How the config is rebuilt: the original run's ``runs.overrides`` plus the new
overrides (a new value for a key replaces the original's) are composed with
:func:`evalhydra.config.compose.compose_config` and validated by
:func:`evalhydra.plan.build.build_plan`, so ``matcher=includes``,
``eval.matcher.case_sensitive=false``, ``judge_service=NAME`` … work as for a
run, and an unknown judge fails before any call. Relative paths in the stored
overrides (``registry=…``) resolve against the current directory.

The cells run through the runner (:func:`evalhydra.execute.runner.execute_cells`)
with the stored outputs as their source (:mod:`evalhydra.execute.rejudge`).
Only evals present in the re-composed config are re-judged (``eval=…`` narrows
the selection); ``trials=`` has no effect: every stored output is judged once.
Agent runs are refused: their trials are judged by each case's ``validator.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio

from evalhydra.cli.commands import CommandParser
from evalhydra.cli.job import publish_run, report_formats
from evalhydra.config.compose import compose_config
from evalhydra.config.defaults import DEFAULT_STORE_PATH
from evalhydra.errors import EvalHydraError
from evalhydra.execute.rejudge import RejudgeTally, open_rejudge_runner, rejudge_jobs
from evalhydra.execute.runner import RunOutcome, execute_cells, new_run_id, run_row
from evalhydra.plan.build import build_plan
from evalhydra.plan.model import RunPlan
from evalhydra.store.db import Store, open_store

__all__ = ["RejudgeResult", "add_arguments", "build_parser", "main", "merge_overrides", "rejudge",
           "run_from_args"]


@dataclass
class RejudgeResult:
    """What a re-judge did: the new run, the runner's outcome, the re-judge counts, the gate."""

    run_id: str
    outcome: RunOutcome
    tally: RejudgeTally
    gate_failed: bool


def rejudge(store_path: str | Path, run_id: str, overrides: Sequence[str] = (), *,
            out: Path | None = None) -> RejudgeResult:
    """Re-judge the stored outputs of ``run_id`` as a new run, write its reports, apply its gates.

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
        gate_failed = _publish(store, plan, outcome, out or path.parent / "runs" / new_id)
        return RejudgeResult(run_id=new_id, outcome=outcome, tally=tally, gate_failed=gate_failed)
    finally:
        store.close()


def merge_overrides(original: Iterable[str], new: Iterable[str]) -> list[str]:
    """The original overrides, minus those whose key a new override sets, then the new ones.

    Keys compare without Hydra's ``+``/``++``/``~`` prefixes, so
    ``["matcher=exact_match", "trials=2"] + ["matcher=includes"]`` gives
    ``["trials=2", "matcher=includes"]``.
    """
    new = list(new)
    replaced = {_override_key(o) for o in new}
    return [o for o in original if _override_key(o) not in replaced] + new


def _override_key(override: str) -> str:
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
        value = json.loads(raw) if isinstance(raw, str) else (raw or [])
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EvalHydraError(f"Run '{run['run_id']}' has unreadable overrides {raw!r}.")
    return [v for v in value if not v.endswith("=<redacted>")]  # secrets were never stored


def _run_row(plan: RunPlan, run_id: str, total: int, parent: dict[str, Any],
             overrides: list[str]) -> dict[str, Any]:
    row = run_row(replace(plan, overrides=tuple(overrides)), run_id, total)
    row.update(kind=parent.get("kind") or row["kind"], parent_run_id=parent["run_id"])
    return row


def _publish(store: Store, plan: RunPlan, outcome: RunOutcome, out: Path) -> bool:
    """The re-judge run's reports, summary and gates, configured like the parent's run."""
    gate_failed, _ = publish_run(store, outcome, out, formats=report_formats(plan),
                                 fail_under=plan.run.fail_under, per_eval=plan.run.fail_under_per_eval)
    return gate_failed


# -- CLI ----------------------------------------------------------------------------------


DESCRIPTION = ("Score the stored outputs of a run again (judges are called, the candidate service never "
               "is) and store the verdicts as a new run linked to the original.")
EPILOG = ("Example: evalhydra rejudge latest matcher=includes matcher.case_sensitive=false\n"
          "         evalhydra rejudge eval-quality-1a2b3c4d judge_service=mock_judge")


def add_arguments(parser: argparse.ArgumentParser, *, store: bool = True) -> None:
    """Add rejudge's arguments (``store=False`` when the caller adds ``--store`` itself)."""
    parser.add_argument("run_id", metavar="RUN_ID", help="run id, unique prefix, or 'latest'")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                        help="Hydra overrides on top of the run's own (matcher=…, judge_service=…)")
    if store:
        parser.add_argument("--store", default=DEFAULT_STORE_PATH, metavar="PATH",
                            help=f"SQLite store (default: {DEFAULT_STORE_PATH})")
    parser.add_argument("--out", metavar="DIR",
                        help="report directory (default: <store dir>/runs/<new run id>)")


def build_parser() -> argparse.ArgumentParser:
    """The ``evalhydra rejudge`` argument parser."""
    parser = CommandParser(prog="evalhydra rejudge", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    """Run ``evalhydra rejudge``; return the exit code (0 ok, 1 gate failed, 2 user error).

    Options and overrides may be given in any order (``RUN_ID --store X matcher=includes``).

    Args:
        argv: The arguments after ``rejudge``.
    """
    return run_from_args(build_parser().parse_intermixed_args(list(argv)))


def run_from_args(args: argparse.Namespace) -> int:
    """Run a parsed ``rejudge`` command (``run_id``, ``overrides``, ``store``, ``out``)."""
    if any(_override_key(o) == "trials" for o in args.overrides):
        print("note: trials= does not apply to rejudge; every stored output is judged once "
              "(re-judge again to sample the judge again).", file=sys.stderr)
    try:
        result = rejudge(args.store, args.run_id, args.overrides, out=Path(args.out) if args.out else None)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tally = result.tally
    print(f"rejudged {tally.parent_run_id} -> {result.run_id}: {tally.judged} judged again, "
          f"{tally.copied} copied (generation failed), {tally.changed} verdict(s) changed")
    for eval_id, count in tally.skipped_evals.items():
        print(f"warning: skipped {count} result(s) of eval '{eval_id}': not in the config", file=sys.stderr)
    if result.outcome.interrupted:
        print("interrupted: the new run is incomplete.", file=sys.stderr)
        return 130
    return 1 if result.gate_failed else 0
