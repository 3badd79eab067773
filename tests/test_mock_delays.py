"""The mock's delay line: many requests' latencies behind one timer, on trio's virtual clock."""

from __future__ import annotations

import trio
import trio.testing

from evalhydra.testing.mock.delays import SLACK, DelayLine


async def _sleeper(line: DelayLine, seconds: float, woke: list[tuple[float, float]]) -> None:
    start = trio.current_time()
    await line.sleep(seconds)
    woke.append((seconds, trio.current_time() - start))


async def test_every_delay_is_waited_out_and_at_most_slack_more(autojump_clock: object) -> None:
    line = DelayLine()
    woke: list[tuple[float, float]] = []
    delays = [0.05, 0.01, 0.2, 0.0502, 0.01, 1.0, 0.3]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.run)
        await trio.lowlevel.checkpoint()  # the timer is running
        async with trio.open_nursery() as sleepers:
            for seconds in delays:
                sleepers.start_soon(_sleeper, line, seconds, woke)
            await trio.testing.wait_all_tasks_blocked()
            assert line.waiting == len(delays)  # every one waits in the line, none in trio.sleep
        nursery.cancel_scope.cancel()
    assert sorted(s for s, _ in woke) == sorted(delays)
    for seconds, waited in woke:
        assert seconds <= waited <= seconds + SLACK + 1e-9, (seconds, waited)
    order = [s for s, _ in woke]  # due order, except within one wake-up (SLACK apart)
    assert all(order.index(a) < order.index(b) for a in order for b in order if b - a > SLACK)
    assert line.waiting == 0


async def test_an_earlier_delay_arriving_later_shortens_the_timer(autojump_clock: object) -> None:
    line = DelayLine()
    woke: list[tuple[float, float]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.run)
        await trio.lowlevel.checkpoint()
        nursery.start_soon(_sleeper, line, 10.0, woke)
        await trio.sleep(1)  # the timer now waits for t = 10
        start = trio.current_time()
        await line.sleep(0.5)
        assert 0.5 <= trio.current_time() - start <= 0.5 + SLACK + 1e-9
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert woke == [(10.0, woke[0][1])] and 10.0 <= woke[0][1] <= 10.0 + SLACK + 1e-9


async def test_a_cancelled_sleeper_leaves_and_the_others_still_wake(autojump_clock: object) -> None:
    line = DelayLine()
    woke: list[tuple[float, float]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.run)
        await trio.lowlevel.checkpoint()
        with trio.move_on_after(0.1) as cancelled:
            await line.sleep(5.0)
        assert cancelled.cancelled_caught
        await _sleeper(line, 1.0, woke)
        nursery.cancel_scope.cancel()
    assert len(woke) == 1 and 1.0 <= woke[0][1] <= 1.0 + SLACK + 1e-9


async def test_without_its_timer_the_line_sleeps_like_trio(autojump_clock: object) -> None:
    line = DelayLine()
    start = trio.current_time()
    await line.sleep(2.0)
    assert trio.current_time() - start == 2.0
    assert line.waiting == 0
