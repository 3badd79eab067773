"""The no-yield fast path behaves like the trio call it stands for."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from evalhydra.core import trio_util


async def test_holding_waits_for_a_token_and_always_gives_it_back() -> None:
    limiter = trio.CapacityLimiter(1)
    order: list[str] = []

    async def second() -> None:
        async with trio_util.Holding(limiter):
            order.append("second")

    with trio.testing.assert_no_checkpoints():
        async with trio_util.Holding(limiter):
            pass
    assert limiter.borrowed_tokens == 0
    async with trio.open_nursery() as nursery, trio_util.Holding(limiter):
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        order.append("first")  # second is still waiting for the token
    assert order == ["first", "second"] and limiter.borrowed_tokens == 0
    with pytest.raises(RuntimeError):
        async with trio_util.Holding(limiter):
            raise RuntimeError("boom")
    assert limiter.borrowed_tokens == 0


async def test_a_waiting_call_is_cancellable() -> None:
    limiter = trio.CapacityLimiter(1)
    limiter.acquire_on_behalf_of_nowait("someone else")
    with trio.move_on_after(0.01) as scope:
        async with trio_util.Holding(limiter):
            pass
    assert scope.cancelled_caught and limiter.borrowed_tokens == 1


def test_run_clock_reads_the_clock_of_its_run() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    run_clock = trio_util.RunClock()

    async def main() -> tuple[float, float, float]:
        first = run_clock.now()
        await trio.sleep(7.5)
        return first, run_clock.now(), trio.current_time()

    first, later, current = trio.run(main, clock=clock)
    assert later - first == 7.5 and later == current  # virtual time, the run's own
    other = trio_util.RunClock()
    assert abs(trio.run(lambda: _now_minus_current(other))) < 1e-3  # a real clock's run


async def _now_minus_current(run_clock: trio_util.RunClock) -> float:
    return run_clock.now() - trio.current_time()
