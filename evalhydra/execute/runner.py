"""Execute cells with trio and record them in the store.

Shape of a run::

    cell source ──JobQueue──▶ N workers (N = run.concurrency; each service's CapacityLimiter)
                                 │ RowSink
                                 ▼
                           one writer task ──batches──▶ SQLite (in a worker thread)

Both queues are bounded (a chunk of claimed cells; two batches of rows), so a
slow store or service applies backpressure instead of growing a queue, and
neither costs a task switch per cell while it has room and work. SIGINT/SIGTERM
cancel the work scope: in-flight calls are cancelled, finished results are
flushed, and the run is marked ``interrupted``.

What a cell does is the :class:`CellRunner`'s business: :func:`execute` runs a
plan's chat or agent cells; ``evalhydra rejudge`` runs the same loop over
stored outputs with a runner that only calls judges
(:mod:`evalhydra.execute.rejudge_cell`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import trio

from evalhydra.agents.command import cli_version
from evalhydra.agents.loader import load_cases
from evalhydra.core.usercode import USER_THREADS, passes_through
from evalhydra.execute.agent_cell import AgentCellRunner
from evalhydra.execute.chat_cell import ChatCellRunner
from evalhydra.execute.deadend import FAIL_FAST_CELLS, DeadEndpointWatch
from evalhydra.execute.feed import Feed
from evalhydra.execute.gcpace import RunGcPace
from evalhydra.execute.jobqueue import JobQueue
from evalhydra.execute.masked import masked_rows, run_secrets
from evalhydra.execute.outcome import RunOutcome
from evalhydra.execute.progress import HEARTBEAT_S, Progress
from evalhydra.execute.rows import crashed_row
from evalhydra.execute.runrecord import new_run_id, run_row
from evalhydra.execute.services import build_matchers, open_services
from evalhydra.execute.signals import watch_signals
from evalhydra.execute.writer import RowSink, store_writer
from evalhydra.plan.cells import CellJob, count_cells, planned_cells
from evalhydra.plan.model import RunPlan
from evalhydra.services.base import EndpointReport
from evalhydra.services.batch import BatchDeferred
from evalhydra.services.openai.secrets import secrets_of
from evalhydra.store.claims import Claims
from evalhydra.store.db import Store
from evalhydra.store.rows import ResultRow, now_iso
from evalhydra.telemetry.export import SpanSink

__all__ = [
    "CellRunner",
    "RunOutcome",
    "execute",
    "execute_cells",
    "open_plan_runner",
]


class CellRunner(Protocol):
    """Executes one cell: returns its result row and its HTTP attempt rows. Never raises
    for a per-call problem (the row's ``error_kind`` says what went wrong)."""

    async def run(self, job: CellJob) -> tuple[ResultRow, list[dict[str, Any]]]:
        """Execute ``job``."""
        ...

    def status(self) -> str:
        """Its services' note for the progress line ("" with nothing to say)."""
        ...

    def refused(self) -> list[EndpointReport]:
        """Its endpoints that refused requests (429), for the summary."""
        ...


#: Opens a cell runner (and the services it calls) inside the run's helper nursery.
OpenRunner = Callable[[trio.Nursery], AbstractAsyncContextManager[CellRunner]]


async def execute(
    plan: RunPlan,
    store: Store,
    *,
    run_id: str | None = None,
    total: int | None = None,
    progress: Progress | None = None,
    spans: SpanSink | None = None,
) -> RunOutcome:
    """Run every pending cell of ``plan`` and record results in ``store``.

    Args:
        plan: The validated plan.
        store: An open, writable store (used from a worker thread; one writer).
        run_id: Reuse an id (tests); a new one is made otherwise.
        total: The cell count if already known (from :func:`~evalhydra.plan.cells.count_cells`).
        progress: Where progress goes; a quiet one is made if None.
        spans: Where each written cell's spans go (``telemetry.export``).
    """
    run_id = run_id or new_run_id(plan)
    total = count_cells(plan) if total is None else total
    USER_THREADS.reset()
    done = {} if plan.fresh else store.done_versions(
        [e.id for e in plan.evals], plan.service.name, retry_errors=plan.resend_errors,
        client_errors=plan.resend_client_errors)
    row = run_row(plan, run_id, total)
    claims = Claims(store.path, run_id, row["started_at"], resend_errors=plan.resend_errors, fresh=plan.fresh)
    agent = plan.service.kind == "command"
    if agent:  # as zrb's experiment.json has them
        row["agent_case_dirs"] = [str(case.path) for ev in plan.evals
                                  for case in load_cases(ev.cases, plan.registry_root)]
    try:
        with ThreadPoolExecutor(1) as side:  # `<cli> --version` while the trials run, not before them
            version = side.submit(cli_version, plan.service) if agent else None
            outcome = await execute_cells(plan, store, row, planned_cells(plan),
                                          partial(open_plan_runner, plan, run_id),
                                          done=done, progress=progress, claims=claims, spans=spans)
        if version is not None:
            store.finish_run(run_id, agent_cli_version=version.result())
        return outcome
    finally:
        claims.close()


@asynccontextmanager
async def open_plan_runner(plan: RunPlan, run_id: str, nursery: trio.Nursery) -> AsyncIterator[CellRunner]:
    """The runner of a plan's own cells: chat cells on its HTTP service, or agent trials."""
    async with open_services(plan, nursery, run_id=run_id) as (service, judges):
        if service is None:
            yield AgentCellRunner(plan, run_id, traced=_traced(plan))
        else:
            secrets = secrets_of([plan.service, *plan.judges.values()])
            runner = ChatCellRunner(service, build_matchers(plan, judges), plan.registry_root, run_id, judges,
                                    secrets=secrets, nursery=nursery, services=judges, traced=_traced(plan))
            try:
                yield runner
            finally:
                if runner.shared is not None:
                    runner.shared.close()  # the run's shared MCP sessions end with it


def _traced(plan: RunPlan) -> bool:
    """Whether each cell's requests carry its ``traceparent`` (telemetry on, propagation kept)."""
    return plan.telemetry is not None and plan.telemetry.propagate


async def execute_cells(
    plan: RunPlan,
    store: Store,
    row: dict[str, Any],
    jobs: Iterable[CellJob],
    open_runner: OpenRunner,
    *,
    done: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    claims: Claims | None = None,
    spans: SpanSink | None = None,
) -> RunOutcome:
    """Record a run (``row``) and execute each of ``jobs`` whose key is not in ``done``.

    Jobs whose key is in ``done`` (stored cells, each with the run that stored the version
    read) are already stored: they join the run without being executed. With ``claims``,
    every other job is claimed in the store before it is sent; one that another live run
    holds is left to it. The run ends ``completed``, ``interrupted`` or ``failed``.
    """
    outcome = RunOutcome(run_id=row["run_id"], total=row["cells_total"])
    store.start_run(row)
    progress = progress or Progress(outcome.total, enabled=False)
    status = "failed"
    work_scope = trio.CancelScope()  # SIGINT/SIGTERM cancel it; the watcher outlives the flush
    async with trio.open_nursery() as guard:
        guard.start_soon(watch_signals, work_scope)
        if claims is not None:
            claims.start_renewing()
        try:
            source = _Source(jobs, done or {}, claims, spans)
            with RunGcPace():
                await _run(plan, store, source, open_runner, outcome, progress, work_scope)
            status = "interrupted" if outcome.interrupted else "completed"
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(partial(
                    store.finish_run, outcome.run_id, status=status, finished_at=now_iso(),
                    cells_run=outcome.executed))
                if claims is not None:
                    await trio.to_thread.run_sync(claims.release)
            progress.close()
        guard.cancel_scope.cancel()
    return outcome


@dataclass
class _Source:
    """Where a run's cells come from: the jobs, the keys already stored, and the claims; and where
    the spans of the cells it writes go (telemetry)."""

    jobs: Iterable[CellJob]
    done: Mapping[str, str]
    claims: Claims | None
    spans: SpanSink | None = None


@dataclass
class _Work:
    """What every task of one run shares."""

    plan: RunPlan
    run_id: str
    runner: CellRunner
    rows: RowSink
    outcome: RunOutcome
    progress: Progress
    watch: DeadEndpointWatch = field(default_factory=lambda: DeadEndpointWatch(0))
    stop: trio.CancelScope = field(default_factory=trio.CancelScope)
    secrets: list[str] = field(default_factory=list)  # masked in every row before it is stored


async def _run(plan: RunPlan, store: Store, source: _Source, open_runner: OpenRunner, outcome: RunOutcome,
               progress: Progress, work_scope: trio.CancelScope) -> None:
    rows = RowSink(plan.run.batch_size)
    async with trio.open_nursery() as outer:
        claims_of = outcome.run_id if source.claims is not None else None
        written = source.spans.record if source.spans is not None else None
        outer.start_soon(partial(store_writer, rows, store, claims_of=claims_of, on_written=written))
        try:
            async with trio.open_nursery() as helpers:
                if progress.enabled:  # a line at least every HEARTBEAT_S, whatever the cells do
                    await helpers.start(_heartbeat, progress)
                async with open_runner(helpers) as runner:
                    progress.extra = runner.status  # the endpoints' limits and the batches
                    chat = plan.service.kind != "command"  # an agent's TIMEOUT is no dead endpoint
                    watch = DeadEndpointWatch(FAIL_FAST_CELLS if plan.run.fail_fast and chat else 0)
                    work = _Work(plan, outcome.run_id, runner, rows, outcome, progress, watch,
                                 secrets=run_secrets(plan))
                    with work_scope:
                        await _work(work, source)
                    outcome.interrupted = work_scope.cancelled_caught
                    outcome.rate_limited = runner.refused()
                helpers.cancel_scope.cancel()
        finally:
            rows.close()  # the writer writes what is pending, then ends


async def _heartbeat(progress: Progress, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                     ) -> None:
    """The status on the run's clock while cells run: off a terminal a line every
    :data:`HEARTBEAT_S` seconds (a hung server, a rate limit, a batch waiting for hours all
    still print), on one a refresh of the bar every second."""
    progress.heartbeat_task = True
    task_status.started()
    try:
        while True:
            await trio.sleep(1.0 if progress.tty else HEARTBEAT_S)
            progress.heartbeat()
    finally:
        progress.heartbeat_task = False


async def _work(work: _Work, source: _Source) -> None:
    concurrency = _workers(work)
    # Two chunks' worth, not one: a put of one chunk is taken at once by the workers waiting
    # for it, so with one the queue ran dry before each next claim and nearly every cell
    # waited for the producer.
    jobs = JobQueue[CellJob](2 * _chunk(work))
    with work.stop:  # cancelled when the endpoint is found dead: cells in flight are not stored
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_produce, work, source, jobs)
            for _ in range(concurrency):
                nursery.start_soon(_worker, work, jobs)


def _workers(work: _Work) -> int:
    """Cells in flight: ``run.concurrency``; in batch mode, a batch file's worth (``batch.max_requests``),
    since a cell waits on its batch for as long as the provider takes."""
    batch = work.plan.service.batch
    if work.plan.service.kind == "command" or not batch.enabled:
        return work.plan.run.concurrency
    return max(1, min(max(work.plan.run.concurrency, batch.max_requests), work.outcome.total))


#: Most cells claimed in one transaction.
_CLAIM_CHUNK = 1024


def _chunk(work: _Work) -> int:
    """Cells claimed (and queued) at a time: twice ``run.concurrency``, at most :data:`_CLAIM_CHUNK`.

    A claim's round trip through a worker thread lasts about one scheduling batch of the
    busy event loop (every worker whose reply arrived runs first), so a chunk of
    ``concurrency`` cells per trip barely kept up with the workers, who then waited for
    the producer at nearly every cell.
    """
    return max(1, min(_CLAIM_CHUNK, 2 * work.plan.run.concurrency))


async def _produce(work: _Work, source: _Source, jobs: JobQueue[CellJob]) -> None:
    """Send pending cells to the workers; record stored ones as members of this run.

    Pending cells are claimed a chunk at a time (a chunk is at most twice
    ``run.concurrency`` cells), so two processes on one store take turns
    instead of one claiming everything up front.
    """
    feed = Feed(work.run_id, work.rows, work.outcome, work.progress, source.claims, jobs, source.done)
    chunk = _chunk(work)
    pending: list[CellJob] = []
    try:
        for job in source.jobs:
            if job.key in source.done:
                if feed.reuse(job.key):
                    await feed.flush_reused()
            elif _over_budget(work):
                work.outcome.budget_exhausted = True
                break
            else:
                pending.append(job)
                if len(pending) >= chunk:
                    await feed.send(pending)
                    pending = []
        await feed.send(pending)
        await feed.flush_reused()
    finally:
        feed.keep_reused()
        jobs.close()


def _over_budget(work: _Work) -> bool:
    cap = work.plan.run.max_cost_usd
    return cap is not None and work.outcome.cost_usd >= cap


async def _worker(work: _Work, jobs: JobQueue[CellJob]) -> None:
    """One of ``run.concurrency`` workers: the worker count is the run's bound on cells in
    flight (a CapacityLimiter of the same size around each cell could never block)."""
    outcome, rows = work.outcome, work.rows
    while (job := await jobs.get()) is not None:
        if _over_budget(work):
            outcome.budget_exhausted = True
            continue  # the budget is spent: drain queued cells without starting them
        work.progress.in_flight += 1
        try:
            ran = await _run_cell(work, job)
        finally:
            work.progress.in_flight -= 1
        if ran is None:  # left in a batch still pending at the provider: nothing to store
            work.progress.skip(1)
            continue
        row, attempts = masked_rows(*ran, work.secrets)
        outcome.executed += 1
        outcome.cost_usd += (row.cost_usd or 0.0) + (row.judge_cost_usd or 0.0)
        is_error = row.is_error
        outcome.errors += is_error
        work.progress.advance(passed=bool(row.passed), error=is_error)
        await rows.put((row,), ((work.run_id, job.key),), attempts)
        if work.watch.saw(row):
            outcome.dead_endpoint = (f"{work.watch.reason}" if work.watch.silent
                                     else f"the first {work.watch.failed} cells all failed to connect or "
                                          f"timed out ({work.watch.reason}) and none was answered")
            work.stop.cancel()
    rows.hurry()  # no cell is left to start: write the last ones as they come


async def _run_cell(work: _Work, job: CellJob) -> tuple[ResultRow, list[dict[str, Any]]] | None:
    """Run one cell; whatever it raises becomes its stored infrastructure error, not the run's.
    None: the cell waits in a batch a rerun will collect (or one ``run.max_cost_usd`` held back)."""
    try:
        return await work.runner.run(job)
    except BatchDeferred as deferred:
        work.outcome.deferred += 1
        work.outcome.deferred_reason = str(deferred)
        work.outcome.budget_exhausted |= deferred.budget
        return None
    except BaseException as exc:  # noqa: BLE001 (a cell's trouble stays in the cell, sys.exit too)
        if passes_through(exc):
            raise
        plan = work.plan
        return crashed_row(job, work.run_id, plan.service.name, plan.model, exc), []


