"""Trio primitives that skip the scheduling round when they need not wait.

``await channel.send(x)``, ``await channel.receive()`` and ``async with
limiter`` always yield to the scheduler, which puts the task at the back of
the run queue. When hundreds of replies arrive together (a fixed-latency
upstream at high concurrency), every such yield between one reply and the
next request costs the worker a round of the other ready tasks (a few ms each
at C=500 in ``bench/throughput.py``). These helpers take the ``*_nowait``
path when it succeeds and fall back to the waiting call, which checkpoints,
only when they must wait. A worker still checkpoints on every HTTP read and
write, so cancellation stays prompt.
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

import trio

__all__ = ["Holding", "receive", "send"]

T = TypeVar("T")


async def send(channel: trio.MemorySendChannel[T], value: T) -> None:
    """Send ``value``, waiting only when the channel is full."""
    try:
        channel.send_nowait(value)
    except trio.WouldBlock:
        await channel.send(value)


async def receive(channel: trio.MemoryReceiveChannel[T]) -> T:
    """Receive a value, waiting only when the channel is empty.

    Raises:
        trio.EndOfChannel: When the channel is closed and empty.
    """
    try:
        return channel.receive_nowait()
    except trio.WouldBlock:
        return await channel.receive()


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
