"""Re-judging: the runner's loop over stored outputs, calling judges and never the candidate.

:func:`rejudge_jobs` is the cell source (one job per stored result of the
parent run) and :class:`RejudgeCellRunner` the cell runner; both plug into
:func:`evalhydra.execute.runner.execute_cells`, so re-judging shares the
runner's nursery, limiter, writer, signal handling and run bookkeeping.

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
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, ErrorKind, ToolCall
from evalhydra.execute.rows import attempt_row, copied_row, parent_details, rejudged_row
from evalhydra.execute.services import build_matchers, open_services
from evalhydra.matchers.base import MatchContext, Matcher
from evalhydra.plan.cells import CellJob
from evalhydra.plan.model import EvalPlan, RunPlan
from evalhydra.registry.datasets import iter_cases
from evalhydra.services.base import EndpointReport, RunServices
from evalhydra.store.db import Store
from evalhydra.store.rows import ResultRow

__all__ = [
    "RejudgeCellRunner",
    "RejudgeTally",
    "StoredResult",
    "open_rejudge_runner",
    "rejudge_cell_key",
    "rejudge_jobs",
]

#: Error kinds that come from the matcher itself (the output exists and can be judged again).
_MATCHER_FAULTS = frozenset({str(ErrorKind.MATCHER_ERROR)})


@dataclass(frozen=True)
class StoredResult:
    """A stored result being judged again, with its original candidate calls."""

    row: dict[str, Any]
    candidate_attempts: int
    candidate_retried: bool


@dataclass
class RejudgeTally:
    """What a re-judge did beyond the runner's counts."""

    parent_run_id: str
    judged: int = 0  # results judged again
    copied: int = 0  # results whose generation failed, copied unchanged
    changed: int = 0  # verdicts that differ from the parent's
    skipped_evals: dict[str, int] = field(default_factory=dict)  # eval id -> results not in the config


def rejudge_cell_key(parent_key: str, matcher_hash: str, run_id: str) -> str:
    """The cell key of a re-judged result (unique per parent cell, matcher and run)."""
    text = "\x1f".join(["rejudge", parent_key, matcher_hash, run_id])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def rejudge_jobs(store: Store, plan: RunPlan, run_id: str, tally: RejudgeTally) -> list[CellJob]:
    """One job per stored result of the parent run whose eval the plan selects.

    Each job's ``parent`` is a :class:`StoredResult`; results of other evals are
    counted in ``tally.skipped_evals``. The list is read whole before the run
    starts writing to the same store.
    """
    return list(_iter_jobs(store, plan, run_id, tally))


def _as_text(row: dict[str, Any]) -> dict[str, Any]:
    """The stored row with any BLOB (a merged or hand-edited store) read as UTF-8 text: a
    matcher scores text, and JSON reports cannot hold bytes."""
    return {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v for k, v in row.items()}


def _iter_jobs(store: Store, plan: RunPlan, run_id: str, tally: RejudgeTally) -> Iterator[CellJob]:
    evals = {ev.id: ev for ev in plan.evals}
    cases: dict[str, dict[str, Case]] = {}
    for stored in store.run_rows([tally.parent_run_id]):
        row = _as_text(stored)
        ev = evals.get(row["eval_id"])
        if ev is None:
            tally.skipped_evals[row["eval_id"]] = tally.skipped_evals.get(row["eval_id"], 0) + 1
            continue
        if ev.id not in cases:
            cases[ev.id] = _dataset_cases(plan, ev)
        case = cases[ev.id].get(row["case_id"]) or _stored_case(row)
        key = rejudge_cell_key(row["cell_key"], ev.result_hash, run_id)
        parent = StoredResult(row, *_candidate_calls(store, row))
        yield CellJob(key=key, eval=ev, case=case, trial=int(row["run_index"]), parent=parent)


@asynccontextmanager
async def open_rejudge_runner(plan: RunPlan, run_id: str, tally: RejudgeTally,
                              nursery: trio.Nursery) -> AsyncIterator[RejudgeCellRunner]:
    """Open only the judge services (mock judges start in-process); never the candidate."""
    async with open_services(plan, nursery, candidate=False) as (_, judges):
        yield RejudgeCellRunner(build_matchers(plan, judges), run_id, tally, judges)


class RejudgeCellRunner:
    """Scores a stored output again with the plan's matchers."""

    def __init__(self, matchers: dict[str, Matcher], run_id: str, tally: RejudgeTally,
                 services: RunServices | None = None) -> None:
        self.matchers = matchers
        self.run_id = run_id
        self.tally = tally
        self.services = services  # the judges: their status and refusals

    def status(self) -> str:
        """The judges' note for the progress line."""
        return self.services.status() if self.services is not None else ""

    def refused(self) -> list[EndpointReport]:
        """The judges' endpoints that refused requests (429)."""
        return self.services.refused() if self.services is not None else []

    async def run(self, job: CellJob) -> tuple[ResultRow, list[dict[str, Any]]]:
        """Judge one stored output again (or copy it when its generation failed)."""
        parent: StoredResult = job.parent
        if _generation_failed(parent.row):
            row, attempts = copied_row(job, self.run_id, self.tally.parent_run_id), []
            self.tally.copied += 1
        else:
            started = trio.current_time()
            match = await self.matchers[job.eval.id](_context(job.case, parent.row))
            latency_ms = (trio.current_time() - started) * 1000
            row = rejudged_row(job, self.run_id, self.tally.parent_run_id, match, latency_ms)
            judge = match.judge
            calls = judge.attempts if judge else ()
            attempts = [attempt_row(job.key, self.run_id, "judge", a) for a in calls]
            self.tally.judged += 1
        self.tally.changed += bool(row.passed) != bool(parent.row.get("passed"))
        return row, attempts

def _dataset_cases(plan: RunPlan, ev: EvalPlan) -> dict[str, Case]:
    if ev.dataset_path is None:
        return {}
    try:
        cases = iter_cases(plan.registry_root, ev.dataset_path, check_attachments=False, template=ev.template,
                           base=ev.base_dir)
        return {c.id: c for c in cases}
    except EvalHydraError:
        return {}  # the dataset is gone or broken: judge with the stored input and ideal


def _stored_case(row: Mapping[str, Any]) -> Case:
    return Case(id=str(row["case_id"]), input=row.get("input") or "", ideal=row.get("ideal"),
                content_hash=row.get("case_hash") or "")


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    try:
        items = strictjson.loads_plain(raw) if isinstance(raw, str) else (raw or [])
    except ValueError:
        return ()
    if not isinstance(items, list):
        return ()
    return tuple(ToolCall(name=str(i.get("name", "")), arguments=str(i.get("arguments", "")),
                          arguments_object=i.get("arguments_object") is True)
                 for i in items if isinstance(i, dict))


def _generation_failed(row: Mapping[str, Any]) -> bool:
    """True when the stored result has no output to judge (the candidate call failed)."""
    error = row.get("error_kind")
    if error is None or error in _MATCHER_FAULTS:
        return False
    return row.get("judge_attempt_count") is None  # a judge was called: the candidate answered


def _context(case: Case, row: Mapping[str, Any]) -> MatchContext:
    reasoning = row.get("reasoning")
    return MatchContext(case=case, output=row.get("output") or "",
                        tool_calls=_tool_calls(row.get("tool_calls")),
                        reasoning=reasoning if isinstance(reasoning, str) else None)


def _candidate_calls(store: Store, parent: Mapping[str, Any]) -> tuple[int, bool]:
    """The original candidate calls' HTTP attempt count and whether any was retried.

    From the parent's own re-judge record, else the ``attempts`` audit table,
    else the row's totals minus its (last) judge call.
    """
    previous = parent_details(parent).get("rejudge")
    if isinstance(previous, dict) and "candidate_attempt_count" in previous:
        return int(previous["candidate_attempt_count"]), bool(previous.get("candidate_retried"))
    audit = list(store.query(
        "select attempt from attempts where cell_key = ? and run_id = ? and call like 'candidate%'",
        [parent["cell_key"], parent["run_id"]]))
    if audit:
        return len(audit), any(a["attempt"] > 1 for a in audit)
    attempts = max(int(parent.get("attempt_count") or 0) - int(parent.get("judge_attempt_count") or 0), 0)
    return attempts, bool(parent.get("retried")) and not parent.get("judge_retried")
