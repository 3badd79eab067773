"""Rows on their way to the store, and the one task that writes them.

Workers hand each cell's rows to a :class:`RowSink` without a task switch (a
channel send per cell woke the writer once per cell); the writer task takes
them a batch at a time and commits each batch off the trio thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import trio

from evalhydra.store.db import Batch, Store
from evalhydra.store.inserts import ReusedCells
from evalhydra.store.rows import ResultRow

__all__ = ["FLUSH_INTERVAL_S", "RowSink", "store_writer"]

FLUSH_INTERVAL_S = 0.25


class RowSink:
    """Rows waiting for the writer, taken a batch at a time.

    Args:
        batch_size: Results (or run members) per transaction. Adding rows waits
            while twice this many are pending, so a slow store slows the run
            instead of growing memory.
    """

    def __init__(self, batch_size: int) -> None:
        self.batch_size = max(1, batch_size)
        self.pending = Batch()
        self.closed = False
        self.hurried = False
        self._filled = trio.Event()  # a row is pending, or the sink is closed
        self._full = trio.Event()  # a batch is pending, or the sink is closed
        self._room = trio.lowlevel.ParkingLot()  # tasks waiting for the writer to take rows

    async def put(self, results: Iterable[ResultRow] = (), members: Iterable[tuple[str, str]] = (),
                  attempts: Iterable[dict[str, Any]] = (),
                  reused: Iterable[ReusedCells] = ()) -> None:
        """Add rows; waits only while the writer is two batches behind."""
        pending = self.pending
        pending.results.extend(results)
        pending.members.extend(members)
        pending.attempts.extend(attempts)
        pending.reused.extend(reused)
        if not self._filled.is_set():
            self._filled.set()
        if _size(pending) >= self.batch_size or self.hurried:
            self._full.set()
            while _size(self.pending) >= 2 * self.batch_size:
                await self._room.park()

    def put_nowait(self, reused: Iterable[ReusedCells]) -> None:
        """Add reused cells without waiting for room: a cancelled producer's last ones, which
        the writer writes when the sink closes."""
        self.pending.reused.extend(reused)
        self._filled.set()

    def hurry(self) -> None:
        """From now on the writer takes rows as soon as it is free, not a batch at a time.

        Workers call it when no cell is left to start: the rows still to come are the
        last cells' in flight, and waiting for a full batch or the flush interval only
        leaves them all to one write after the last cell, which the run then waits for.
        """
        self.hurried = True
        if len(self.pending):
            self._full.set()

    def take(self) -> Batch:
        """Every pending row (the writer's); wakes the tasks waiting for room."""
        batch, self.pending = self.pending, Batch()
        self._filled, self._full = trio.Event(), trio.Event()
        if self.closed:
            self._filled.set()
            self._full.set()
        self._room.unpark_all()
        return batch

    def close(self) -> None:
        """No more rows: the writer writes what is pending and ends."""
        self.closed = True
        self._filled.set()
        self._full.set()

    async def wait(self, interval: float) -> None:
        """Until rows are pending and either a batch is full or ``interval`` has passed since."""
        await self._filled.wait()  # no timer while nothing is pending
        with trio.move_on_after(interval):
            await self._full.wait()


def _size(batch: Batch) -> int:
    """A batch's size against ``batch_size``: its longest list of rows (asked at every cell's put, so
    the reused cells, rarely any, are counted only when there are some)."""
    reused = sum(len(cells.keys) for cells in batch.reused) if batch.reused else 0
    return max(len(batch.results), len(batch.members), reused)


async def store_writer(sink: RowSink, store: Store, flush_interval: float = FLUSH_INTERVAL_S, *,
                       claims_of: str | None = None,
                       on_written: Callable[[list[Any]], None] | None = None) -> None:
    """The only task that writes: one transaction per batch of the sink, or per
    ``flush_interval`` seconds, whichever comes first, committed off the trio thread.

    A crash loses at most the last interval's results, which resume re-runs;
    nothing stored is ever duplicated. With ``claims_of``, that run's claims on the
    results written end in the same transactions (:meth:`~evalhydra.store.db.Store.write`).
    With ``on_written``, each written batch's results are handed to it after the commit (off the
    trio thread too): what telemetry exports is stored.
    """
    write = partial(_write, store, claims_of, on_written)
    try:
        while not (sink.closed and not len(sink.pending)):
            await sink.wait(flush_interval)
            batch = sink.take()
            if len(batch):
                await trio.to_thread.run_sync(write, batch)
    finally:
        with trio.CancelScope(shield=True):
            batch = sink.take()
            if len(batch):
                await trio.to_thread.run_sync(write, batch)


def _write(store: Store, claims_of: str | None, on_written: Callable[[list[Any]], None] | None,
           batch: Batch) -> None:
    store.write(batch, claims_of=claims_of)
    if on_written is not None and batch.results:
        on_written(batch.results)
