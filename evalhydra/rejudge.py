"""``evalhydra rejudge RUN_ID [OVERRIDES...]``: score a run's stored outputs again.

Re-judging separates judge variance from generation variance: the outputs a
run stored are matched again (judges really are called; the candidate service
never is) and the new verdicts are stored as a **new run** whose
``runs.parent_run_id`` is the original. Re-judge the same run several times to
sample the judge; re-judge a re-judge to chain changes.

How the config is rebuilt: the original run's ``runs.overrides`` plus the new
overrides (a new value for a key replaces the original's) are composed with
:func:`evalhydra.config.compose_config` and validated by
:func:`evalhydra.config.build_plan`, so ``matcher=includes``,
``eval.matcher.case_sensitive=false``, ``judge_service=NAME`` … work as for a
run, and an unknown judge fails before any call. Relative paths in the stored
overrides (``registry=…``) resolve against the current directory.

Each stored result becomes one new result:

* the case is the eval's current dataset case with the stored ``case_id``
  (so a corrected ``ideal`` is used); a case no longer in the dataset is
  rebuilt from the stored ``input`` and ``ideal``;
* ``output`` and ``tool_calls`` are the stored ones; generation columns
  (model, tokens, ``status_code``, ``attempts``, ``attempt_history``) are
  copied; ``cost_usd`` is 0 (nothing was generated) and ``judge_*``,
  ``latency_ms`` (the matcher's time) and the verdict are this run's;
  ``attempt_count``/``retried`` combine the original candidate calls with the
  new judge calls;
* a result whose candidate call failed has no output to judge: it is copied
  with its error;
* the new cell key hashes the original key, the new matcher settings and the
  new run id, so repeated re-judges never overwrite each other;
* ``details["rejudge"]`` names the parent run and cell and keeps the parent
  verdict, so old and new verdicts pair up exactly.

Only evals present in the re-composed config are re-judged (``eval=…`` narrows
the selection); ``trials=`` has no effect: every stored output is judged once.
Agent runs are refused: their trials are judged by each case's ``validator.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import trio

from evalhydra.config import EvalPlan, RunPlan, build_plan, compose_config
from evalhydra.errors import EvalHydraError, did_you_mean
from evalhydra.matchers.base import MatchContext, Matcher
from evalhydra.store import Batch, Store, open_store
from evalhydra.types import INFRA_ERRORS, Case, ErrorKind, MatchResult, ToolCall

__all__ = [
    "RejudgeOutcome",
    "add_arguments",
    "build_parser",
    "main",
    "merge_overrides",
    "rejudge",
    "rejudge_cell_key",
    "rejudge_run",
    "run_from_args",
]

DEFAULT_STORE = "outputs/evalhydra.db"
#: Error kinds that come from the matcher itself (the output exists and can be judged again).
_MATCHER_FAULTS = frozenset({str(ErrorKind.MATCHER_ERROR)})


@dataclass
class RejudgeOutcome:
    """What a re-judge did."""

    run_id: str
    parent_run_id: str
    total: int = 0
    executed: int = 0  # results judged again
    copied: int = 0  # results whose generation failed, copied unchanged
    skipped_evals: list[str] = field(default_factory=list)
    changed: int = 0  # verdicts that differ from the parent's
    interrupted: bool = False
    skipped: int = 0  # for the shared summary printer (nothing is resumed)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Job:
    parent: dict[str, Any]  # the stored result being judged again
    eval: EvalPlan
    case: Case
    key: str  # the new cell key
    candidate: tuple[int, bool]  # the original candidate calls: attempts, retried


# -- public API -----------------------------------------------------------------


def rejudge(store_path: str | Path, run_id: str, overrides: Sequence[str] = ()) -> str:
    """Re-judge the stored outputs of ``run_id``; return the new run's id.

    Args:
        store_path: The SQLite store holding the run (the new run goes there too).
        run_id: The run to re-judge: a full id, a unique prefix, or ``latest``.
        overrides: Hydra overrides applied on top of the run's own, e.g.
            ``["matcher=includes"]`` or ``["judge_service=mock_judge"]``.

    Raises:
        EvalHydraError: Unknown run, invalid config or judge (before any call).
    """
    return rejudge_run(store_path, run_id, overrides).run_id


def rejudge_run(store_path: str | Path, run_id: str, overrides: Sequence[str] = ()) -> RejudgeOutcome:
    """Like :func:`rejudge`, returning the full :class:`RejudgeOutcome`."""
    path = Path(store_path).expanduser().resolve()
    if not path.exists():
        raise EvalHydraError(f"No store at {path}.", "Pass --store PATH.")
    store = open_store(path)
    try:
        parent = _parent_run(store, run_id)
        if parent.get("kind") == "agent":
            raise EvalHydraError(
                f"Run '{parent['run_id']}' is an agent run; rejudge scores stored chat outputs.",
                "Agent trials are judged by their case's validator.py, not by a matcher.")
        merged = merge_overrides(_stored_overrides(parent), overrides)
        plan = build_plan(compose_config([*merged, f"store.path={path}"]), merged)
        outcome = RejudgeOutcome(run_id=_new_run_id(plan), parent_run_id=parent["run_id"])
        jobs = list(_jobs(store, plan, parent["run_id"], outcome))
        if not jobs:
            selected = ", ".join(e.id for e in plan.evals)
            raise EvalHydraError(
                f"Run '{parent['run_id']}' has no results of the evals selected ({selected}).")
        outcome.total = len(jobs)
        store.start_run(_run_row(plan, outcome, parent, merged))
        status = "failed"
        try:
            trio.run(_rejudge_all, plan, store, jobs, outcome)
            status = "interrupted" if outcome.interrupted else "completed"
        finally:
            from evalhydra.cells import now_iso

            store.finish_run(outcome.run_id, status=status, finished_at=now_iso(),
                             cells_run=outcome.executed + outcome.copied)
        return outcome
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


def rejudge_cell_key(parent_key: str, matcher_hash: str, run_id: str) -> str:
    """The cell key of a re-judged result (unique per parent cell, matcher and run)."""
    text = "\x1f".join(["rejudge", parent_key, matcher_hash, run_id])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# -- the parent run -----------------------------------------------------------------


def _override_key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~").strip()


def _parent_run(store: Store, given: str) -> dict[str, Any]:
    runs = store.runs()
    known = [r["run_id"] for r in runs]
    if given == "latest":
        if not runs:
            raise EvalHydraError("The store has no runs yet.", "Run an eval first.")
        return runs[0]
    matches = [r for r in runs if r["run_id"] == given] or [r for r in runs if r["run_id"].startswith(given)]
    if len(matches) != 1:
        what = "is ambiguous" if matches else "not found"
        raise EvalHydraError(f"Run '{given}' {what}.", did_you_mean(given, known[:50]))
    return matches[0]


def _stored_overrides(run: dict[str, Any]) -> list[str]:
    raw = run.get("overrides")
    try:
        value = json.loads(raw) if isinstance(raw, str) else (raw or [])
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EvalHydraError(f"Run '{run['run_id']}' has unreadable overrides {raw!r}.")
    return [v for v in value if not v.endswith("=<redacted>")]  # secrets were never stored


def _new_run_id(plan: RunPlan) -> str:
    groups = {e.group for e in plan.evals}
    name = next(iter(groups)) if len(groups) == 1 else "suite"
    slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") or "run"
    return f"eval-rejudge-{slug}-{uuid.uuid4().hex[:8]}"


def _run_row(plan: RunPlan, outcome: RejudgeOutcome, parent: dict[str, Any],
             overrides: list[str]) -> dict[str, Any]:
    from evalhydra.runner import run_row

    row = run_row(replace(plan, overrides=tuple(overrides)), outcome.run_id, outcome.total)
    row.update(kind=parent.get("kind") or row["kind"], parent_run_id=parent["run_id"])
    return row


# -- jobs ---------------------------------------------------------------------------------


def _jobs(store: Store, plan: RunPlan, parent_id: str, outcome: RejudgeOutcome) -> Iterator[_Job]:
    evals = {ev.id: ev for ev in plan.evals}
    cases: dict[str, dict[str, Case]] = {}
    skipped: dict[str, int] = {}
    for row in store.run_rows([parent_id]):
        ev = evals.get(row["eval_id"])
        if ev is None:
            skipped[row["eval_id"]] = skipped.get(row["eval_id"], 0) + 1
            continue
        if ev.id not in cases:
            cases[ev.id] = _dataset_cases(plan, ev)
        case = cases[ev.id].get(row["case_id"]) or _stored_case(row)
        key = rejudge_cell_key(row["cell_key"], ev.result_hash, outcome.run_id)
        yield _Job(parent=row, eval=ev, case=case, key=key, candidate=_candidate_calls(store, row))
    for eval_id, count in skipped.items():
        outcome.skipped_evals.append(eval_id)
        outcome.warnings.append(f"skipped {count} result(s) of eval '{eval_id}': not in the config")


def _dataset_cases(plan: RunPlan, ev: EvalPlan) -> dict[str, Case]:
    if ev.dataset_path is None:
        return {}
    from evalhydra.registry import iter_cases

    try:
        return {c.id: c for c in iter_cases(plan.registry_root, ev.dataset_path, check_attachments=False)}
    except EvalHydraError:
        return {}  # the dataset is gone or broken: judge with the stored input and ideal


def _stored_case(row: dict[str, Any]) -> Case:
    return Case(id=str(row["case_id"]), input=row.get("input") or "", ideal=row.get("ideal"),
                content_hash=row.get("case_hash") or "")


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    try:
        items = json.loads(raw) if isinstance(raw, str) else (raw or [])
    except json.JSONDecodeError:
        return ()
    if not isinstance(items, list):
        return ()
    return tuple(ToolCall(name=str(i.get("name", "")), arguments=str(i.get("arguments", "")))
                 for i in items if isinstance(i, dict))


def _generation_failed(row: dict[str, Any]) -> bool:
    """True when the stored result has no output to judge (the candidate call failed)."""
    error = row.get("error_kind")
    if error is None or error in _MATCHER_FAULTS:
        return False
    return row.get("judge_attempt_count") is None  # a judge was called: the candidate answered


def _context(job: _Job) -> MatchContext:
    row = job.parent
    return MatchContext(case=job.case, output=row.get("output") or "",
                        tool_calls=_tool_calls(row.get("tool_calls")))


# -- running ------------------------------------------------------------------------------


async def _rejudge_all(plan: RunPlan, store: Store, jobs: list[_Job], outcome: RejudgeOutcome) -> None:
    from evalhydra.runner import store_writer, watch_signals

    rows_tx, rows_rx = trio.open_memory_channel[Batch](plan.run.batch_size * 2)
    async with trio.open_nursery() as outer:
        outer.start_soon(store_writer, rows_rx, store, plan.run.batch_size)
        async with rows_tx, trio.open_nursery() as helpers:
            async with _open_judges(plan, helpers) as judges:
                matchers = _matchers(plan, judges)
                with trio.CancelScope() as work_scope:
                    helpers.start_soon(watch_signals, work_scope)
                    await _work(plan, jobs, matchers, rows_tx, outcome)
                outcome.interrupted = work_scope.cancelled_caught
            helpers.cancel_scope.cancel()


def _matchers(plan: RunPlan, judges: Any) -> dict[str, Matcher]:
    from evalhydra.matchers.factory import build_matcher

    return {ev.id: build_matcher(ev.matcher, registry_root=plan.registry_root, judges=judges,
                                 where=f"eval '{ev.id}': matcher") for ev in plan.evals}


@asynccontextmanager
async def _open_judges(plan: RunPlan, nursery: trio.Nursery) -> AsyncIterator[Any]:
    """Open only the judge services (mock judges start in-process); never the candidate."""
    from evalhydra.runner import JudgeServices, open_service
    from evalhydra.services.base import Service

    opened: dict[str, Service] = {}
    try:
        for name, cfg in plan.judges.items():
            opened[name] = await open_service(plan, cfg, nursery)
        yield JudgeServices(opened)
    finally:
        with trio.CancelScope(shield=True):
            for service in opened.values():
                await service.aclose()


async def _work(plan: RunPlan, jobs: list[_Job], matchers: dict[str, Matcher],
                rows_tx: trio.MemorySendChannel[Batch], outcome: RejudgeOutcome) -> None:
    jobs_tx, jobs_rx = trio.open_memory_channel[_Job](0)
    limit = max(1, min(plan.run.concurrency, len(jobs)))
    async with trio.open_nursery() as work:
        async with jobs_rx:
            for _ in range(limit):
                work.start_soon(_worker, matchers, jobs_rx.clone(), rows_tx.clone(), outcome)
        async with jobs_tx:
            for job in jobs:
                await jobs_tx.send(job)


async def _worker(matchers: dict[str, Matcher], jobs_rx: trio.MemoryReceiveChannel[_Job],
                  rows_tx: trio.MemorySendChannel[Batch], outcome: RejudgeOutcome) -> None:
    async with jobs_rx, rows_tx:
        async for job in jobs_rx:
            if _generation_failed(job.parent):
                row, attempts = _copied_row(job, outcome), []
                outcome.copied += 1
            else:
                started = trio.current_time()
                match = await matchers[job.eval.id](_context(job))
                latency = (trio.current_time() - started) * 1000
                row = _judged_row(job, match, latency, outcome)
                attempts = _attempt_rows(job.key, outcome.run_id, match)
                outcome.executed += 1
            if bool(row["passed"]) != bool(job.parent.get("passed")):
                outcome.changed += 1
            await rows_tx.send(Batch(results=[row], members=[(outcome.run_id, job.key)], attempts=attempts))


# -- rows ---------------------------------------------------------------------------------


def _judge_label(matcher: dict[str, Any]) -> str | None:
    from evalhydra.matchers.factory import judge_services_of

    return ",".join(sorted(judge_services_of(matcher))) or None


def _parent_details(parent: dict[str, Any]) -> dict[str, Any]:
    raw = parent.get("details")
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        value = None
    return value if isinstance(value, dict) else {}


def _candidate_calls(store: Store, parent: dict[str, Any]) -> tuple[int, bool]:
    """The original candidate calls' HTTP attempt count and whether any was retried.

    From the parent's own re-judge record, else the ``attempts`` audit table,
    else the row's totals minus its (last) judge call.
    """
    previous = _parent_details(parent).get("rejudge")
    if isinstance(previous, dict) and "candidate_attempt_count" in previous:
        return int(previous["candidate_attempt_count"]), bool(previous.get("candidate_retried"))
    audit = list(store.query(
        "select attempt from attempts where cell_key = ? and run_id = ? and call like 'candidate%'",
        [parent["cell_key"], parent["run_id"]]))
    if audit:
        return len(audit), any(a["attempt"] > 1 for a in audit)
    attempts = max(int(parent.get("attempt_count") or 0) - int(parent.get("judge_attempt_count") or 0), 0)
    return attempts, bool(parent.get("retried")) and not parent.get("judge_retried")


def _rejudge_info(job: _Job, outcome: RejudgeOutcome) -> dict[str, Any]:
    parent = job.parent
    return {
        "parent_run_id": outcome.parent_run_id,
        "parent_cell_key": parent["cell_key"],
        "parent_passed": bool(parent.get("passed")),
        "parent_score": parent.get("score"),
        "candidate_attempt_count": job.candidate[0],
        "candidate_retried": job.candidate[1],
    }


def _base_row(job: _Job, run_id: str) -> dict[str, Any]:
    from evalhydra.cells import now_iso

    row = dict(job.parent)
    row.update(
        cell_key=job.key,
        run_id=run_id,
        input=job.case.input,
        ideal=job.case.ideal,
        case_hash=job.case.content_hash or job.parent.get("case_hash"),
        cost_usd=0.0,
        evaluated_at=now_iso(),
    )
    return row


def _copied_row(job: _Job, outcome: RejudgeOutcome) -> dict[str, Any]:
    row = _base_row(job, outcome.run_id)
    details = {k: v for k, v in _parent_details(job.parent).items() if k != "rejudge"}
    info = {**_rejudge_info(job, outcome), "skipped": "the candidate call failed; nothing to judge"}
    row.update(latency_ms=0, judge_cost_usd=None, judge_service=_judge_label(job.eval.matcher),
               pass_threshold=job.eval.matcher.get("pass_threshold", job.eval.matcher.get("pass_score")),
               details={**details, "rejudge": info})
    return row


def _judged_row(job: _Job, match: MatchResult, latency_ms: float, outcome: RejudgeOutcome) -> dict[str, Any]:
    judge, error = match.judge, match.error_kind
    status = "ERROR" if error in INFRA_ERRORS or error == ErrorKind.RENDER_ERROR else (
        "PASS" if match.passed else "FAIL")
    candidate = job.candidate
    matcher = job.eval.matcher
    row = _base_row(job, outcome.run_id)
    row.update(
        status=status,
        passed=bool(match.passed) and error is None,
        score=float(match.score),
        failure_reason=None if match.passed else match.reason,
        error_kind=str(error) if error else None,
        attempt_count=candidate[0] + (judge.attempt_count if judge else 0),
        retried=candidate[1] or bool(judge and judge.retried),
        judge_attempt_count=judge.attempt_count if judge else None,
        judge_retried=judge.retried if judge else None,
        judge_status_code=judge.status_code if judge else None,
        judge_service=_judge_label(matcher),
        judge_model=judge.model if judge else None,
        latency_ms=int(round(latency_ms)),
        judge_prompt_tokens=judge.usage.prompt_tokens if judge else None,
        judge_completion_tokens=judge.usage.completion_tokens if judge else None,
        judge_cost_usd=judge.cost_usd if judge else None,
        details={**(match.details or {}), "rejudge": _rejudge_info(job, outcome)},
        feedback=match.feedback,
        rubric_scores=match.rubric_scores,
        failure_category=match.failure_category,
        suggested_fix=match.suggested_fix,
        pass_threshold=matcher.get("pass_threshold", matcher.get("pass_score")),
    )
    return row


def _attempt_rows(key: str, run_id: str, match: MatchResult) -> list[dict[str, Any]]:
    if match.judge is None:
        return []
    return [{"cell_key": key, "run_id": run_id, "call": "judge", "attempt": a.attempt,
             "status_code": a.status_code, "error_kind": str(a.error_kind) if a.error_kind else None,
             "latency_ms": round(a.latency_ms, 3), "error_message": a.error_message}
            for a in match.judge.attempts]


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
        parser.add_argument("--store", default=DEFAULT_STORE, metavar="PATH",
                            help=f"SQLite store (default: {DEFAULT_STORE})")
    parser.add_argument("--out", metavar="DIR",
                        help="report directory (default: <store dir>/runs/<new run id>)")


def build_parser() -> argparse.ArgumentParser:
    """The ``evalhydra rejudge`` argument parser."""
    parser = argparse.ArgumentParser(prog="evalhydra rejudge", description=DESCRIPTION, epilog=EPILOG,
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
        outcome = rejudge_run(args.store, args.run_id, args.overrides)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _report(Path(args.store).expanduser().resolve(), outcome, Path(args.out) if args.out else None)


def _report(store_path: Path, outcome: RejudgeOutcome, out: Path | None) -> int:
    from evalhydra.run import publish_run

    store = open_store(store_path)
    try:
        run = store.runs([outcome.run_id])[0]
        config = json.loads(run["config"]) if isinstance(run["config"], str) else run["config"]
        run_cfg = config.get("run") or {}
        gate_failed = publish_run(
            store, outcome, out or store_path.parent / "runs" / outcome.run_id,
            formats=config.get("report") or ["json", "md"], fail_under=run_cfg.get("fail_under"),
            per_eval=run_cfg.get("fail_under_per_eval"))
        print(f"rejudged {outcome.parent_run_id} -> {outcome.run_id}: {outcome.executed} judged again, "
              f"{outcome.copied} copied (generation failed), {outcome.changed} verdict(s) changed")
        for warning in outcome.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if outcome.interrupted:
            print("interrupted: the new run is incomplete.", file=sys.stderr)
            return 130
        return 1 if gate_failed else 0
    finally:
        store.close()
