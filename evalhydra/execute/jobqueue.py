"""Cells on their way from the producer to the workers.

A memory channel costs a task switch per cell (the producer blocks on a full
channel, a worker on an empty one), which costs more than the rest of the
runner's own bookkeeping (``bench/throughput.py``). :class:`JobQueue`
is a deque the producer tops up a chunk at a time: a worker takes a cell
without a switch while any is queued, and the producer wakes only when the
queue runs low, so the next chunk is claimed while workers still have work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Generic, TypeVar

import trio

__all__ = ["JobQueue"]

T = TypeVar("T")


class JobQueue(Generic[T]):
    """A queue of jobs filled in chunks by one producer and drained by many workers.

    Args:
        low: The producer's :meth:`put` returns once fewer than this many jobs
            are queued (its next chunk then arrives before the workers run out).
    """

    def __init__(self, low: int) -> None:
        self._items: deque[T] = deque()
        self._low = max(1, low)
        self._closed = False
        self._workers = trio.lowlevel.ParkingLot()
        self._producer = trio.lowlevel.ParkingLot()

    def __len__(self) -> int:
        return len(self._items)

    async def put(self, items: Iterable[T]) -> None:
        """Queue ``items``, then wait until fewer than ``low`` are left (or the queue is closed)."""
        self._items.extend(items)
        if self._workers:
            self._workers.unpark_all()
        while len(self._items) >= self._low and not self._closed:
            await self._producer.park()

    async def get(self) -> T | None:
        """The next job, or None once the queue is closed and empty."""
        items = self._items
        while not items:
            if self._closed:
                return None
            if self._producer:
                self._producer.unpark_all()
            await self._workers.park()
        item = items.popleft()
        if self._producer and len(items) < self._low:
            self._producer.unpark_all()
        return item

    def close(self) -> None:
        """No more jobs: waiting workers get None once the queue is empty."""
        self._closed = True
        self._workers.unpark_all()
        self._producer.unpark_all()
