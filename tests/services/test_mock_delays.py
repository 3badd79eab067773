"""The mock's delay line: many requests' latencies behind one timer, on trio's virtual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing

from evalhydra.services.mock.delays import SLACK, DelayLine


@asynccontextmanager
async def running_line() -> AsyncIterator[tuple[DelayLine, trio.Nursery]]:
    """A line with its timer running, and a nursery for sleepers; both end on exit."""
    line = DelayLine()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.run)
        await trio.lowlevel.checkpoint()
        yield line, nursery
        nursery.cancel_scope.cancel()


def waited_out(seconds: float, waited: float) -> bool:
    """At least the delay, at most SLACK more."""
    return seconds <= waited <= seconds + SLACK + 1e-9


async def _sleeper(line: DelayLine, seconds: float, woke: list[tuple[float, float]]) -> None:
    start = trio.current_time()
    await line.sleep(seconds)
    woke.append((seconds, trio.current_time() - start))


async def test_every_delay_is_waited_out_and_at_most_slack_more(autojump_clock: object) -> None:
    woke: list[tuple[float, float]] = []
    delays = [0.05, 0.01, 0.2, 0.0502, 0.01, 1.0, 0.3]
    async with running_line() as (line, _), trio.open_nursery() as sleepers:
        for seconds in delays:
            sleepers.start_soon(_sleeper, line, seconds, woke)
        await trio.testing.wait_all_tasks_blocked()
        assert line.waiting == len(delays)  # every one waits in the line, none in trio.sleep
    assert sorted(s for s, _ in woke) == sorted(delays)
    assert all(waited_out(seconds, waited) for seconds, waited in woke), woke
    order = [s for s, _ in woke]  # due order, except within one wake-up (SLACK apart)
    assert all(order.index(a) < order.index(b) for a in order for b in order if b - a > SLACK)
    assert line.waiting == 0


async def test_an_earlier_delay_arriving_later_shortens_the_timer(autojump_clock: object) -> None:
    woke: list[tuple[float, float]] = []
    async with running_line() as (line, nursery):
        nursery.start_soon(_sleeper, line, 10.0, woke)
        await trio.sleep(1)  # the timer now waits for t = 10
        start = trio.current_time()
        await line.sleep(0.5)
        assert waited_out(0.5, trio.current_time() - start)
        await trio.sleep(10)
    assert len(woke) == 1 and waited_out(*woke[0])


async def test_a_cancelled_sleeper_leaves_and_the_others_still_wake(autojump_clock: object) -> None:
    woke: list[tuple[float, float]] = []
    async with running_line() as (line, _):
        with trio.move_on_after(0.1) as cancelled:
            await line.sleep(5.0)
        assert cancelled.cancelled_caught
        await _sleeper(line, 1.0, woke)
    assert len(woke) == 1 and waited_out(*woke[0])


async def test_without_its_timer_the_line_sleeps_like_trio(autojump_clock: object) -> None:
    line = DelayLine()
    start = trio.current_time()
    await line.sleep(2.0)
    assert trio.current_time() - start == 2.0
    assert line.waiting == 0
