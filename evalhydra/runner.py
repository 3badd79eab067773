"""Execute a :class:`~evalhydra.config.RunPlan` with trio and record it in the store.

Shape of a run::

    producer ──jobs──▶ N workers (global CapacityLimiter, per-service limiter)
                              │ rows
                              ▼
                        one writer task ──batches──▶ SQLite (in a worker thread)

The channels are bounded, so a slow store or service applies backpressure
instead of growing a queue. SIGINT/SIGTERM cancel the work scope: in-flight
calls are cancelled, finished results are flushed, and the run is marked
``interrupted``.
"""

from __future__ import annotations

import os
import signal
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

import evalhydra
from evalhydra import fastpath
from evalhydra.cells import CellJob, ChatCellRunner, now_iso
from evalhydra.config import EvalPlan, RunPlan, cell_key, redact_overrides, service_result_hash
from evalhydra.matchers.base import Matcher
from evalhydra.progress import Progress
from evalhydra.registry import iter_cases
from evalhydra.schema import ServiceConfig
from evalhydra.services.base import Service
from evalhydra.store import Batch, Store
from evalhydra.types import ChatRequest, Completion

__all__ = [
    "JudgeServices", "RunOutcome", "count_cells", "execute", "iter_plan_cases", "new_run_id", "open_service",
    "planned_cells", "run_row", "store_writer", "watch_signals",
]

FLUSH_INTERVAL_S = 0.25


@dataclass
class RunOutcome:
    """What happened, for the summary and the exit code."""

    run_id: str
    total: int = 0
    skipped: int = 0
    executed: int = 0
    errors: int = 0
    cost_usd: float = 0.0
    interrupted: bool = False
    budget_exhausted: bool = False


def new_run_id(plan: RunPlan) -> str:
    """``eval-<slug>-<8 hex>`` (the aiwg run_id pattern)."""
    name = plan.evals[0].group if len({e.group for e in plan.evals}) == 1 else "suite"
    slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") or "run"
    return f"eval-{slug}-{uuid.uuid4().hex[:8]}"


def count_cells(plan: RunPlan) -> int:
    """Validate every dataset (streaming) and count the run's cells."""
    total = 0
    for ev in plan.evals:
        total += sum(1 for _ in iter_plan_cases(plan, ev)) * ev.trials
    return total


def iter_plan_cases(plan: RunPlan, ev: EvalPlan, *, check: bool = True) -> Iterator[Any]:
    """Stream an eval's cases: dataset lines, or agent case directories."""
    if ev.cases is not None:
        from evalhydra.agents import load_cases

        yield from load_cases(ev.cases, plan.registry_root)
        return
    assert ev.dataset_path is not None
    yield from iter_cases(plan.registry_root, ev.dataset_path, check_attachments=check)


def _case_hash(case: Any) -> str:
    return str(getattr(case, "content_hash", "") or getattr(case, "name", ""))


def _case_id(case: Any) -> str:
    return str(getattr(case, "id", None) or getattr(case, "name", ""))


def run_row(plan: RunPlan, run_id: str, total: int) -> dict[str, Any]:
    """The ``runs`` row of a new invocation (config already redacted)."""
    return {
        "run_id": run_id,
        "kind": "agent" if plan.service.kind == "command" else "chat",
        "started_at": now_iso(),
        "status": "running",
        "overrides": redact_overrides(plan.overrides),
        "config": plan.config,
        "fingerprint": plan.fingerprint,
        "version": evalhydra.__version__,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "cells_total": total,
        "sweep_dir": plan.sweep_dir,
        "parent_run_id": None,
    }


async def execute(
    plan: RunPlan,
    store: Store,
    *,
    run_id: str | None = None,
    total: int | None = None,
    progress: Progress | None = None,
) -> RunOutcome:
    """Run every pending cell of ``plan`` and record results in ``store``.

    Args:
        plan: The validated plan.
        store: An open, writable store (used from a worker thread; one writer).
        run_id: Reuse an id (tests); a new one is made otherwise.
        total: The cell count if already known (from :func:`count_cells`).
        progress: Where progress goes; a quiet one is made if None.
    """
    run_id = run_id or new_run_id(plan)
    total = count_cells(plan) if total is None else total
    outcome = RunOutcome(run_id=run_id, total=total)
    store.start_run(run_row(plan, run_id, total))
    done = store.done_keys([e.id for e in plan.evals], plan.service.name, retry_errors=plan.run.retry_errors)
    progress = progress or Progress(total, enabled=False)
    status = "failed"
    try:
        await _run(plan, store, run_id, done, outcome, progress)
        status = "interrupted" if outcome.interrupted else "completed"
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(
                lambda: store.finish_run(
                    run_id, status=status, finished_at=now_iso(), cells_run=outcome.executed
                )
            )
        progress.close()
    return outcome


async def _run(
    plan: RunPlan, store: Store, run_id: str, done: set[str], outcome: RunOutcome, progress: Progress
) -> None:
    rows_tx, rows_rx = trio.open_memory_channel[Batch](plan.run.batch_size * 2)
    async with trio.open_nursery() as outer:
        outer.start_soon(store_writer, rows_rx, store, plan.run.batch_size)
        async with rows_tx, trio.open_nursery() as helpers:
            async with _open_services(plan, helpers) as (service, judges):
                runner = None
                if plan.service.kind != "command":
                    matchers = _matchers(plan, judges)
                    runner = ChatCellRunner(service, matchers, plan.registry_root, run_id, judges)
                with trio.CancelScope() as work_scope:
                    helpers.start_soon(watch_signals, work_scope)
                    await _work(plan, runner, run_id, done, rows_tx, outcome, progress)
                outcome.interrupted = work_scope.cancelled_caught
            helpers.cancel_scope.cancel()


async def _work(
    plan: RunPlan,
    runner: ChatCellRunner | None,
    run_id: str,
    done: set[str],
    rows_tx: trio.MemorySendChannel[Batch],
    outcome: RunOutcome,
    progress: Progress,
) -> None:
    jobs_tx, jobs_rx = trio.open_memory_channel[CellJob](plan.run.concurrency)
    limiter = trio.CapacityLimiter(plan.run.concurrency)
    async with trio.open_nursery() as work:
        work.start_soon(_produce, plan, run_id, done, jobs_tx, rows_tx.clone(), outcome, progress)
        async with jobs_rx:
            for _ in range(plan.run.concurrency):
                work.start_soon(
                    _worker,
                    plan,
                    runner,
                    run_id,
                    jobs_rx.clone(),
                    rows_tx.clone(),
                    limiter,
                    outcome,
                    progress,
                )


def planned_cells(plan: RunPlan) -> Iterator[CellJob]:
    """Every cell of the plan with its resume key: each case's trials together.

    Datasets are streamed once per eval (each line is parsed once, whatever the
    trial count).
    """
    svc_hash = service_result_hash(plan.service)
    for ev in plan.evals:
        for case in iter_plan_cases(plan, ev, check=False):
            case_id, case_hash = _case_id(case), _case_hash(case)
            for trial in range(1, ev.trials + 1):
                key = cell_key(ev, case_id, case_hash, plan.service.name, plan.model, trial, svc_hash)
                yield CellJob(key=key, eval=ev, case=case, trial=trial)


async def _produce(
    plan: RunPlan,
    run_id: str,
    done: set[str],
    jobs_tx: trio.MemorySendChannel[CellJob],
    rows_tx: trio.MemorySendChannel[Batch],
    outcome: RunOutcome,
    progress: Progress,
) -> None:
    """Send pending cells to the workers; record stored ones as members of this run."""
    skipped: list[tuple[str, str]] = []

    async def flush_skipped() -> None:
        await rows_tx.send(Batch(members=skipped[:]))
        progress.skip(len(skipped))
        outcome.skipped += len(skipped)
        skipped.clear()

    async with jobs_tx, rows_tx:
        for job in planned_cells(plan):
            if job.key in done:
                skipped.append((run_id, job.key))
                if len(skipped) >= 1000:
                    await flush_skipped()
            elif _over_budget(plan, outcome):
                outcome.budget_exhausted = True
                break
            else:
                await jobs_tx.send(job)
        if skipped:
            await flush_skipped()


def _over_budget(plan: RunPlan, outcome: RunOutcome) -> bool:
    cap = plan.run.max_cost_usd
    return cap is not None and outcome.cost_usd >= cap


async def _worker(
    plan: RunPlan,
    runner: ChatCellRunner | None,
    run_id: str,
    jobs_rx: trio.MemoryReceiveChannel[CellJob],
    rows_tx: trio.MemorySendChannel[Batch],
    limiter: trio.CapacityLimiter,
    outcome: RunOutcome,
    progress: Progress,
) -> None:
    async with jobs_rx, rows_tx:
        while True:
            try:
                job = await fastpath.receive(jobs_rx)
            except trio.EndOfChannel:
                break
            if _over_budget(plan, outcome):
                outcome.budget_exhausted = True
                continue  # the budget is spent: drain queued cells without starting them
            async with fastpath.Holding(limiter):
                if runner is not None:
                    row, attempts = await runner.run(job)
                else:
                    row, attempts = await _run_agent_cell(plan, job, run_id)
            outcome.executed += 1
            outcome.cost_usd += (row.get("cost_usd") or 0.0) + (row.get("judge_cost_usd") or 0.0)
            is_error = row.get("error_kind") is not None or row["status"] in ("ERROR", "TIMEOUT")
            outcome.errors += is_error
            progress.advance(passed=bool(row.get("passed")), error=is_error)
            await fastpath.send(rows_tx, Batch(results=[row], members=[(run_id, job.key)], attempts=attempts))


async def _run_agent_cell(
    plan: RunPlan, job: CellJob, run_id: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from evalhydra.agent_cells import run_agent_cell

    return await run_agent_cell(plan, job, run_id)


async def store_writer(
    rows_rx: trio.MemoryReceiveChannel[Batch],
    store: Store,
    batch_size: int,
    flush_interval: float = FLUSH_INTERVAL_S,
) -> None:
    """The only task that writes: one transaction per ``batch_size`` results or per
    ``flush_interval`` seconds, whichever comes first, committed off the trio thread.

    A crash loses at most the last interval's results, which resume re-runs;
    nothing stored is ever duplicated.
    """
    pending = Batch()
    try:
        async with rows_rx:
            async for batch in rows_rx:
                pending.extend(batch)
                with trio.move_on_after(flush_interval):
                    while len(pending.results) < batch_size:
                        try:
                            pending.extend(await rows_rx.receive())
                        except trio.EndOfChannel:
                            break
                current, pending = pending, Batch()
                await trio.to_thread.run_sync(store.write, current)
    finally:
        with trio.CancelScope(shield=True):
            if len(pending):
                await trio.to_thread.run_sync(store.write, pending)


async def watch_signals(scope: trio.CancelScope) -> None:
    """Cancel ``scope`` on the first SIGINT or SIGTERM (graceful stop: flush, mark interrupted)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


class JudgeServices:
    """The JudgeClient handed to judge matchers: services by name."""

    def __init__(self, services: dict[str, Service]) -> None:
        self.services = services

    def service_names(self) -> list[str]:
        return sorted(self.services)

    async def judge(self, service_name: str, request: ChatRequest) -> Completion:
        return await self.services[service_name].complete(request)


def _matchers(plan: RunPlan, judges: JudgeServices) -> dict[str, Matcher]:
    from evalhydra.matchers.factory import build_matcher

    return {
        ev.id: build_matcher(ev.matcher, registry_root=plan.registry_root, judges=judges) for ev in plan.evals
    }


@asynccontextmanager
async def _open_services(plan: RunPlan, nursery: trio.Nursery) -> AsyncIterator[tuple[Any, JudgeServices]]:
    """Open the run's service and its judges (starting mock servers as needed)."""
    opened: dict[str, Service] = {}
    try:
        main = None
        if plan.service.kind != "command":
            main = await open_service(plan, plan.service, nursery)
            opened[plan.service.name] = main
        for name, cfg in plan.judges.items():
            if name not in opened:
                opened[name] = await open_service(plan, cfg, nursery)
        yield main, JudgeServices(opened)
    finally:
        with trio.CancelScope(shield=True):
            for service in opened.values():
                await service.aclose()


async def open_service(plan: RunPlan, cfg: ServiceConfig, nursery: trio.Nursery) -> Service:
    """Open one HTTP service, starting its mock server in ``nursery`` when enabled."""
    from evalhydra.services.openai_compat import OpenAICompatService

    base_url = None
    if cfg.mock.enabled:
        base_url = await _start_mock(cfg, nursery)
    return OpenAICompatService(cfg, registry_root=plan.registry_root, base_url=base_url)


async def _start_mock(cfg: ServiceConfig, nursery: trio.Nursery) -> str:
    from evalhydra.mock.server import MockSettings, serve

    handle = await nursery.start(serve, MockSettings.from_config(cfg.mock))
    return str(handle.url)
