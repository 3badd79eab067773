"""Cells waiting on batch jobs: gathered into files, submitted, polled, matched back.

One :class:`BatchQueue` per batch-mode service of a run. Each cell's request
waits in :meth:`BatchQueue.answer` while the queue's task gathers the waiting
requests (until none arrived for a moment, or a file is full), writes them as
JSONL lines (``custom_id`` = the cell key), records the batch in the store's
ledger, creates it at the provider, polls it every ``poll_interval_s`` and hands
each cell its output line. Batches recorded by an earlier run that did not live
to collect them are adopted: their cells wait on them instead of being sent
again.

What a cell gets back is a
:class:`~evalhydra.services.batch.outcomes.LineOutcome`: its line's answer, an infrastructure
error, or a deferral a rerun collects.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio

from evalhydra.config.schema import BatchConfig
from evalhydra.core.values import ErrorKind
from evalhydra.services.batch.api import BatchApi, BatchApiError
from evalhydra.services.batch.lines import BatchLines
from evalhydra.services.batch.outcomes import (
    MISSING,
    LineOutcome,
    batch_errors,
    line_outcome,
    request_line,
)
from evalhydra.store.batches import BatchLedger, BatchRecord

__all__ = ["BatchQueue"]

#: A quiet moment with no new request: the requests gathered so far go out as a batch.
GATHER_S = 0.25
#: The provider statuses after which a batch changes no more.
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
_METADATA_KEY = "evalhydra_batch"


@dataclass
class _Waiter:
    custom_id: str
    body: bytes
    done: trio.Event = field(default_factory=trio.Event)
    outcome: LineOutcome | None = None


@dataclass
class _Tracked:
    """A batch this queue follows: its record and what the provider said last."""

    record: BatchRecord
    status: str = "submitting"
    counts: dict[str, int] = field(default_factory=dict)


class BatchQueue:
    """The batch jobs of one service in one run.

    Args:
        api: The provider's files and batches API.
        ledger: The store's ``batches`` table.
        config: ``service.batch``.
        service: The service's name (the ledger's ``service``).
        endpoint: The API root as recorded (no credentials).
        run_id: The run that submits.
        api_key_env: The variable holding the key, recorded for ``evalhydra batches cancel``.
        adopted: Batches an earlier run recorded and did not finish.
        price_line: A request's estimated online price, for ``run.max_cost_usd``.
        budget_usd: ``run.max_cost_usd`` times the batch discount (None: no cap).
        mask: Takes secrets out of a provider's message.
        url_path: The endpoint every line is for: ``/v1/chat/completions``, or ``/v1/responses``
            for a service with ``api: responses``.
    """

    def __init__(self, api: BatchApi, ledger: BatchLedger, config: BatchConfig, *, service: str,
                 endpoint: str, run_id: str, api_key_env: str | None, adopted: list[BatchRecord],
                 price_line: Callable[[bytes], float] = lambda body: 0.0, budget_usd: float | None = None,
                 mask: Callable[[str], str] = lambda text: text,
                 url_path: str = "/v1/chat/completions") -> None:
        self.api, self.ledger, self.config = api, ledger, config
        self.service, self.endpoint, self.run_id, self.api_key_env = service, endpoint, run_id, api_key_env
        self._adopted = adopted
        self._price_line, self._budget_usd, self._mask = price_line, budget_usd, mask
        self.url_path = url_path
        self.enabled = config.enabled
        self.estimated_usd = 0.0
        self.tracked: dict[str, _Tracked] = {}
        self._pending: list[_Waiter] = []
        self._gathering = trio.Event()  # set while _pending holds lines
        self._waiting: dict[str, _Waiter] = {}
        self._ready: dict[str, LineOutcome] = {}  # answered before their cell asked (adopted batches)
        self._in_batches: set[str] = set()  # ids of open batches: their cells wait, never sent again
        self._resubmitted: set[str] = set()
        self._nursery: trio.Nursery | None = None
        self._started = trio.Event()
        self._stopped = trio.Event()

    # -- what a cell calls ------------------------------------------------------

    def adopts(self, custom_id: str) -> bool:
        """Whether an earlier run's batch holds (or answered) this request."""
        return custom_id in self._in_batches or custom_id in self._ready

    async def answer(self, custom_id: str, body: bytes) -> LineOutcome:
        """Wait for the batch line of ``custom_id`` (sending ``body`` in the next batch unless an
        adopted batch holds it)."""
        await self._started.wait()
        ready = self._ready.pop(custom_id, None)
        if ready is not None:
            return ready
        waiter = _Waiter(custom_id, body)
        self._waiting[custom_id] = waiter
        if custom_id not in self._in_batches:
            self._gather_lines([waiter])
        await waiter.done.wait()
        assert waiter.outcome is not None
        return waiter.outcome

    # -- the queue's task -------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Adopt the earlier batches, then gather and submit until :meth:`stop`."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for record in self._adopted:
                    self._in_batches.update(record.custom_ids)
                    nursery.start_soon(self._adopt, record)
                self._started.set()
                task_status.started()
                await self._gather()
        finally:
            self._stopped.set()

    async def stop(self) -> None:
        """Stop gathering and polling (a batch left pending stays in the ledger for a rerun)."""
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
            await self._stopped.wait()

    def _gather_lines(self, waiters: Iterable[_Waiter]) -> None:
        """Add ``waiters`` to the lines the next batch sends, waking the gatherer."""
        self._pending.extend(waiters)
        if self._pending:
            self._gathering.set()

    async def _gather(self) -> None:
        """Submit the gathered lines once no more came in one window (or a file is full).

        With nothing gathering it waits for a line rather than ticking, so an idle queue sets no
        timer (and trio's MockClock does not run on while a thread writes the ledger).
        """
        last = -1
        while True:
            await self._gathering.wait()
            await trio.sleep(GATHER_S)
            count = len(self._pending)
            if count and (count == last or count >= self.config.max_requests):
                taken, self._pending = self._pending, []
                self._gathering = trio.Event()
                for part in self._files(taken):
                    assert self._nursery is not None
                    self._nursery.start_soon(self._submit, part)
                last = -1
            else:
                last = count

    def _files(self, waiters: list[_Waiter]) -> Iterator[list[_Waiter]]:
        """Split waiters into files within ``max_requests`` lines and ``max_bytes`` bytes."""
        part: list[_Waiter] = []
        size = 0
        for waiter in waiters:
            length = len(request_line(waiter.custom_id, waiter.body, self.url_path)) + 1
            if part and (len(part) >= self.config.max_requests or size + length > self.config.max_bytes):
                yield part
                part, size = [], 0
            part.append(waiter)
            size += length
        if part:
            yield part

    # -- one batch ----------------------------------------------------------------

    async def _submit(self, waiters: list[_Waiter]) -> None:
        ids = [w.custom_id for w in waiters]
        cost = sum(self._price_line(w.body) for w in waiters)
        if self._budget_usd is not None and self.estimated_usd + cost > self._budget_usd:
            self._resolve_all(ids, LineOutcome(deferred=True, budget=True, message=(
                f"not submitted: the batch's estimated ${cost:.4f} would pass run.max_cost_usd")))
            return
        self.estimated_usd += cost
        key = uuid.uuid4().hex
        record = BatchRecord(key, self.run_id, self.service, self.endpoint, ids, api_key_env=self.api_key_env)
        self.tracked[key] = _Tracked(record)
        self._in_batches.update(ids)
        try:
            content = b"\n".join(request_line(w.custom_id, w.body, self.url_path) for w in waiters) + b"\n"
            record.input_file_id = await self.api.upload(content, f"evalhydra-{key}.jsonl")
            record.submitted_at = time.time()
            await trio.to_thread.run_sync(self.ledger.record, record)  # before create: a crash adopts it
            batch = await self.api.create(record.input_file_id, self.config.completion_window, self.url_path,
                                          {_METADATA_KEY: key, "evalhydra_run": self.run_id})
        except BatchApiError as exc:
            await self._not_created(record, exc)
            return
        await self._follow(record, batch)

    async def _not_created(self, record: BatchRecord, exc: BatchApiError) -> None:
        """The batch was refused before it existed: its cells end as infrastructure errors."""
        if record.submitted_at is not None:
            await trio.to_thread.run_sync(self.ledger.forget, record.batch_key)
        self.tracked.pop(record.batch_key, None)
        self._in_batches.difference_update(record.custom_ids)
        message = self._mask(f"the batch could not be created: {exc.message}")
        failed = LineOutcome(status_code=exc.status, error_kind=ErrorKind.BATCH_FAILED, message=message)
        self._resolve_all(record.custom_ids, failed)

    async def _adopt(self, record: BatchRecord) -> None:
        """Follow a batch an earlier run recorded."""
        self.tracked[record.batch_key] = _Tracked(record, record.status, dict(record.request_counts))
        if record.collected_at is not None:
            self._deliver(record, record.status, record.output or "", record.errors or "")
            return
        await self._guarded(record, partial(self._resume, record))

    async def _resume(self, record: BatchRecord) -> None:
        """Find an adopted batch at the provider (by its tag when its id was never recorded)."""
        if record.batch_id is not None:
            batch = await self._with_retries(partial(self.api.retrieve, record.batch_id))
        else:  # recorded, then the run died around create
            batch = await self._with_retries(partial(self.api.find, _METADATA_KEY, record.batch_key))
            if batch is None:
                await self._lost(record, forget=True)
                return
            await trio.to_thread.run_sync(partial(self.ledger.update, record.batch_key,
                                                  batch_id=batch["id"], status=batch["status"]))
        await self._poll_to_end(record, batch)

    async def _follow(self, record: BatchRecord, batch: dict[str, Any]) -> None:
        """Poll a batch this run created to its end."""
        await self._guarded(record, partial(self._poll_to_end, record, batch))

    async def _guarded(self, record: BatchRecord, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step``: a batch the provider forgot goes out again; one it cannot be asked about
        now (polls failing past the timeout, a refused key) is left pending for a rerun."""
        try:
            await step()
        except _PollGaveUp as exc:
            self._defer(record, str(exc))
        except BatchApiError as exc:
            if exc.gone:
                await self._lost(record)
            else:
                self._defer(record, self._mask(exc.message))

    async def _poll_to_end(self, record: BatchRecord, batch: dict[str, Any]) -> None:
        """Poll a created batch to its end, collect its files into the store, and answer its cells."""
        record.batch_id = str(batch["id"])
        tracked = self.tracked[record.batch_key]
        while True:
            await self._saw(record, tracked, batch)
            if batch["status"] in TERMINAL:
                break
            await trio.sleep(self.config.poll_interval_s)
            batch = await self._with_retries(partial(self.api.retrieve, record.batch_id))
        output = await self._download(record, batch.get("output_file_id"), "output")
        errors = await self._download(record, batch.get("error_file_id"), "error")
        message = batch_errors(batch)
        collected = time.time()
        await trio.to_thread.run_sync(partial(
            self.ledger.update, record.batch_key, status=batch["status"], output=output.text(),
            errors=errors.text(), output_file_id=batch.get("output_file_id"),
            error_file_id=batch.get("error_file_id"), collected_at=collected, message=message))
        record.collected_at, record.message = collected, message
        if not self.config.keep_files:  # the lines are in the store now; before the run can end
            await self._delete_files(record, batch)
        self._answer(record, batch["status"], output, errors)

    async def _saw(self, record: BatchRecord, tracked: _Tracked, batch: dict[str, Any]) -> None:
        """Note a batch's status and counts (in the ledger when they changed)."""
        counts = batch["request_counts"]
        if batch["status"] != tracked.status or counts != tracked.counts:
            tracked.status, tracked.counts = batch["status"], counts
            await trio.to_thread.run_sync(partial(
                self.ledger.update, record.batch_key, batch_id=record.batch_id, status=tracked.status,
                request_counts=counts))

    async def _download(self, record: BatchRecord, file_id: str | None, name: str) -> BatchLines:
        """The checked lines of one of a batch's files (none without the file)."""

        async def read() -> BatchLines:
            lines = BatchLines(record.custom_ids, self._mask, name=name)
            if file_id:
                await self.api.read_file(file_id, lines)
            return lines

        found: BatchLines = await self._with_retries(read)
        return found

    async def _delete_files(self, record: BatchRecord, batch: dict[str, Any]) -> None:
        """Delete the batch's files at the provider (a failure leaves them: they expire there)."""
        for file_id in (record.input_file_id, batch.get("output_file_id"), batch.get("error_file_id")):
            if file_id:
                with contextlib.suppress(BatchApiError):
                    await self.api.delete(str(file_id))

    async def _with_retries(self, call: Callable[[], Any]) -> Any:
        """A poll or download, tried again with backoff for ``poll_timeout_s`` while it fails transiently."""
        deadline = trio.current_time() + self.config.poll_timeout_s
        wait = min(1.0, self.config.poll_interval_s)
        while True:
            try:
                return await call()
            except BatchApiError as exc:
                if not exc.transient:
                    raise
                if trio.current_time() + wait > deadline:
                    raise _PollGaveUp(self._mask(exc.message)) from None
            await trio.sleep(wait)
            wait = min(wait * 2, max(self.config.poll_interval_s, 1.0), 60.0)

    # -- answering cells ------------------------------------------------------------

    def _deliver(self, record: BatchRecord, status: str, output: str, errors: str) -> None:
        """Answer every request of a finished batch from its files' text as the ledger kept it
        (checked again: a ledger written before lines were checked may hold anything)."""
        self._answer(record, status, BatchLines.of_text(output, record.custom_ids, self._mask),
                     BatchLines.of_text(errors, record.custom_ids, self._mask, name="error"))

    def _answer(self, record: BatchRecord, status: str, done: BatchLines, failed: BatchLines) -> None:
        """Answer every request of a finished batch from its files' checked lines."""
        latency = ((record.collected_at or time.time()) - (record.submitted_at or time.time())) * 1000.0
        missing_kind, missing_message = MISSING.get(status, MISSING["completed"])
        again: list[_Waiter] = []
        for custom_id in record.custom_ids:
            line = (done.own(custom_id) or failed.own(custom_id)  # a line beats a file's refusal
                    or done.get(custom_id) or failed.get(custom_id))
            outcome = line_outcome(line, latency) if line is not None else LineOutcome(
                error_kind=missing_kind, message=self._mask(record.message or missing_message)
                if status == "failed" else missing_message, latency_ms=latency)
            if outcome.error_kind is not None and self._resend(custom_id, outcome):
                again.append(self._waiting[custom_id])
                continue
            self._resolve(custom_id, outcome)
        self._gather_lines(again)

    def _resend(self, custom_id: str, outcome: LineOutcome) -> bool:
        """``resubmit_failed``: a failed or expired line whose cell waits goes out once more."""
        if not self.config.resubmit_failed or custom_id in self._resubmitted:
            return False
        if custom_id not in self._waiting:
            return False
        if outcome.error_kind not in (ErrorKind.BATCH_LINE_FAILED, ErrorKind.BATCH_EXPIRED):
            return False
        self._resubmitted.add(custom_id)
        return True

    async def _lost(self, record: BatchRecord, *, forget: bool = False) -> None:
        """The provider does not know the batch (it was never created, or it is gone): its cells
        go out again."""
        if forget:
            await trio.to_thread.run_sync(self.ledger.forget, record.batch_key)
        else:
            await trio.to_thread.run_sync(partial(self.ledger.update, record.batch_key, status="lost"))
        self.tracked.pop(record.batch_key, None)
        self._in_batches.difference_update(record.custom_ids)
        self._gather_lines(self._waiting[i] for i in record.custom_ids if i in self._waiting)

    def _defer(self, record: BatchRecord, reason: str) -> None:
        """Polling failed for ``poll_timeout_s``: the batch stays pending for a rerun."""
        batch = record.batch_id or record.batch_key
        message = f"batch {batch} is still pending at the provider ({reason}); a rerun collects it"
        self._resolve_all(record.custom_ids, LineOutcome(deferred=True, message=message))

    def _resolve_all(self, ids: list[str], outcome: LineOutcome) -> None:
        for custom_id in ids:
            self._resolve(custom_id, outcome)

    def _resolve(self, custom_id: str, outcome: LineOutcome) -> None:
        self._in_batches.discard(custom_id)
        waiter = self._waiting.pop(custom_id, None)
        if waiter is None:  # an adopted batch's cell that has not asked yet
            self._ready[custom_id] = outcome
            return
        waiter.outcome = outcome
        waiter.done.set()

    # -- status -----------------------------------------------------------------------

    def status(self) -> str:
        """This queue's batches for the progress line: each batch's status and its lines answered
        (the provider's ``request_counts``), or the totals when there are many."""
        gathering = f"{len(self._pending)} lines gathering" if self._pending else ""
        parts = [_batch_status(t) for t in self.tracked.values()]
        if len(parts) > _LISTED:
            by: dict[str, int] = {}
            for tracked in self.tracked.values():
                by[tracked.status] = by.get(tracked.status, 0) + 1
            done = sum(_answered(t) for t in self.tracked.values())
            total = sum(_lines(t) for t in self.tracked.values())
            states = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in sorted(by.items()))
            parts = [f"{len(self.tracked)} batches ({states}) {done}/{total} lines answered"]
        shown = "; ".join(part for part in (gathering, *parts) if part)
        return f"batch {self.service}: {shown}" if shown else ""


#: Most batches the progress line names one by one.
_LISTED = 3


def _answered(tracked: _Tracked) -> int:
    return tracked.counts.get("completed", 0) + tracked.counts.get("failed", 0)


def _lines(tracked: _Tracked) -> int:
    return tracked.counts.get("total", 0) or len(tracked.record.custom_ids)


def _batch_status(tracked: _Tracked) -> str:
    return f"{tracked.status.replace('_', ' ')} {_answered(tracked)}/{_lines(tracked)}"


class _PollGaveUp(Exception):
    """Polls or downloads failed for longer than ``poll_timeout_s``."""


