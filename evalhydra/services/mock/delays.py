"""The mock's latency: one timer for every request waiting out its delay.

``trio.sleep`` per request opens a cancel scope and, when it expires, cancels it;
under many concurrent clients that delivery (``Deadlines.expire`` →
``CancelScope._cancel`` → ``Cancelled`` raised and caught) becomes a large share of
the mock's CPU, CPU the client under test then cannot use on a small machine.
Here a waiting request is an entry in a heap and a parked task; one timer task
sleeps until the earliest entry is due (plus :data:`SLACK`, so entries due close
together are released in one wake-up) and reschedules every task whose time has
come. A request therefore waits at least its delay and at most :data:`SLACK` more.
"""

from __future__ import annotations

import heapq
from typing import Any

import trio
from trio.lowlevel import Abort, Task, current_task, reschedule, wait_task_rescheduled

__all__ = ["SLACK", "DelayLine"]

#: Seconds a wake-up may come after the earliest due entry, to release its neighbours with it.
SLACK = 0.0005


class DelayLine:
    """Delays for many tasks behind one timer (:meth:`run` must be running; otherwise
    :meth:`sleep` falls back to ``trio.sleep``)."""

    def __init__(self) -> None:
        self._due: list[list[Any]] = []  # [deadline, sequence, task or None once aborted]
        self._sequence = 0
        self._timer: trio.CancelScope | None = None
        self._idle = trio.lowlevel.ParkingLot()
        self._running = False

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed (cancellable like ``trio.sleep``)."""
        if not self._running:
            await trio.sleep(seconds)
            return
        deadline = trio.current_time() + seconds
        entry: list[Any] = [deadline, self._sequence, current_task()]
        self._sequence += 1
        heapq.heappush(self._due, entry)
        if self._timer is None:
            self._idle.unpark()
        elif deadline + SLACK < self._timer.deadline:
            self._timer.deadline = deadline + SLACK

        def abort(_: Any) -> Abort:
            entry[2] = None  # the timer skips it
            return Abort.SUCCEEDED

        await wait_task_rescheduled(abort)

    async def run(self) -> None:
        """The timer: release due entries until cancelled."""
        self._running = True
        try:
            while True:
                if not self._due:
                    await self._idle.park()
                    continue
                with trio.CancelScope(deadline=self._due[0][0] + SLACK) as timer:
                    self._timer = timer
                    await trio.sleep_forever()
                self._timer = None
                self._release(trio.current_time())
        finally:
            self._running = False
            self._timer = None

    def _release(self, now: float) -> None:
        due = self._due
        while due and due[0][0] <= now:
            task: Task | None = heapq.heappop(due)[2]
            if task is not None:
                reschedule(task)

    @property
    def waiting(self) -> int:
        """Entries not yet released (aborted ones included until their time)."""
        return len(self._due)
