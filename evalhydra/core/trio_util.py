"""Trio primitives for the per-cell path: a limiter hold that skips the scheduling round
when it need not wait, and a cheap read of the run's clock.

``async with limiter`` always yields to the scheduler, which puts the task at the back of
the run queue. When hundreds of replies arrive together (a fixed-latency
upstream at high concurrency), every such yield between one reply and the
next request costs the worker a round of the other ready tasks
(``bench/throughput.py`` at high concurrency shows it). :class:`Holding` takes the ``acquire_nowait``
path when it succeeds and falls back to the waiting call, which checkpoints,
only when it must wait. (Jobs and rows move between the runner's tasks through
:mod:`evalhydra.execute.jobqueue` and :class:`evalhydra.execute.writer.RowSink`,
which need no switch per cell at all.) A worker still waits for every reply,
so cancellation stays prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

import trio

__all__ = ["Holding", "RunClock"]


class Holding:
    """``async with Holding(limiter):`` holds a token, waiting only when none is free."""

    __slots__ = ("limiter",)

    def __init__(self, limiter: trio.CapacityLimiter) -> None:
        self.limiter = limiter

    async def __aenter__(self) -> None:
        try:
            self.limiter.acquire_nowait()
        except trio.WouldBlock:
            await self.limiter.acquire()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.limiter.release()


class RunClock:
    """The clock of the trio run that first reads it: ``clock.now()`` is
    ``trio.current_time()`` without its two layers of indirection, which a chat cell
    would pay four times. An object that holds
    one belongs to one trio run, as the run's services and runners do.
    """

    __slots__ = ("now",)

    def __init__(self) -> None:
        #: Returns the run's time (``trio.current_time()``); bound to the run's clock at the first call.
        self.now: Callable[[], float] = self._first

    def _first(self) -> float:
        self.now = trio.lowlevel.current_clock().current_time
        return self.now()
