"""Deadlines of many socket waits kept by one timer task, instead of a cancel scope each.

Opening and closing a trio cancel scope costs more instructions than the rest
of a small request's client work on the lean transport (docs/performance.md). A request sent
with a timeout waits on its socket about once, so :class:`SocketDeadlines`
keeps every such wait's deadline in one heap; a wait costs a push and a flag.

One timer task (a trio system task, started by the first wait of each run)
sleeps until the earliest live deadline. When it passes, the timer wakes that
socket's waiter with ``trio.lowlevel.notify_closing``: the waiter gets
``trio.ClosedResourceError``, sees its entry :data:`EXPIRED`, raises its timeout,
and closes the connection, as after any timeout. Finished waits are dropped lazily: when
they reach the top of the heap, or when they outnumber the live ones.
"""

from __future__ import annotations

import heapq
import itertools
import math
import socket
from typing import Any

import trio

__all__ = ["DEADLINE", "DONE", "EXPIRED", "LIVE", "SocketDeadlines"]

#: A request extension: the trio time by which the exchange must end. A transport whose
#: :attr:`~evalhydra.http.pool.TransportPool.ends_at_deadline` is true honours it.
DEADLINE = "evalhydra.deadline"

#: An entry's state: still waiting, finished in time, or woken by its deadline.
LIVE, DONE, EXPIRED = 0, 1, 2
#: Finished entries kept beyond twice the live ones before the heap is rebuilt.
_SLACK = 1024

Entry = list[Any]  # [deadline, sequence, socket, state]: ordered by deadline, then arrival


class SocketDeadlines:
    """The deadlines of the socket waits of one transport."""

    def __init__(self) -> None:
        self._heap: list[Entry] = []
        self._order = itertools.count()
        self._live = 0
        self._running = False  # a timer task runs in the current trio run
        self._target = math.inf  # when the timer wakes next
        self._sleep: trio.CancelScope | None = None  # the timer's sleep, while it sleeps
        self._idle = trio.lowlevel.ParkingLot()  # the timer, while no deadline is live

    @property
    def held(self) -> int:
        """Entries in the heap: live ones, and finished ones not yet dropped."""
        return len(self._heap)

    def arm(self, deadline: float, sock: socket.socket) -> Entry:
        """Watch a wait on ``sock`` that must end by ``deadline`` (trio time).

        Returns:
            The entry to give :meth:`disarm` when the wait ends; its state is
            :data:`EXPIRED` if the deadline woke the waiter.
        """
        if not self._running:
            self._running = True
            trio.lowlevel.spawn_system_task(self._timer, name="evalhydra.http.deadlines")
        entry = [deadline, next(self._order), sock, LIVE]
        heapq.heappush(self._heap, entry)
        self._live += 1
        if deadline < self._target:
            self._wake_at(deadline)
        return entry

    def disarm(self, entry: Entry) -> None:
        """The wait of ``entry`` has ended (in time, by its deadline, or cancelled)."""
        if entry[3] != LIVE:
            return
        entry[3] = DONE
        self._live -= 1
        if len(self._heap) > 2 * self._live + _SLACK:
            self._heap = [e for e in self._heap if e[3] == LIVE]
            heapq.heapify(self._heap)

    def _wake_at(self, deadline: float) -> None:
        self._target = deadline
        if self._sleep is not None:
            self._sleep.deadline = deadline
        else:
            self._idle.unpark_all()

    async def _timer(self) -> None:
        try:
            while True:
                self._expire(trio.current_time())
                self._target = self._heap[0][0] if self._heap else math.inf
                if self._target == math.inf:
                    await self._idle.park()
                    continue
                with trio.CancelScope(deadline=self._target) as self._sleep:
                    await trio.sleep_forever()
                self._sleep = None
        finally:  # the run is over: the next run's first wait starts a timer of its own
            self._running, self._sleep, self._target = False, None, math.inf

    def _expire(self, now: float) -> None:
        """Drop finished entries from the top; wake the waiters whose deadline has passed."""
        heap = self._heap
        while heap and (heap[0][3] != LIVE or heap[0][0] <= now):
            entry = heapq.heappop(heap)
            if entry[3] == LIVE:
                entry[3] = EXPIRED
                self._live -= 1
                trio.lowlevel.notify_closing(entry[2])
