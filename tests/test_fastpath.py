"""The no-yield fast paths behave like the trio calls they stand for."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from evalhydra import fastpath


async def test_send_and_receive_skip_the_scheduler_only_when_they_need_not_wait() -> None:
    tx, rx = trio.open_memory_channel[int](1)
    with trio.testing.assert_no_checkpoints():
        await fastpath.send(tx, 1)
        assert await fastpath.receive(rx) == 1
    got: list[int] = []

    async def consumer() -> None:
        got.append(await fastpath.receive(rx))  # empty: waits for the producer
        got.append(await fastpath.receive(rx))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        await trio.testing.wait_all_tasks_blocked()
        await fastpath.send(tx, 2)
        await fastpath.send(tx, 3)
        with trio.testing.assert_checkpoints():
            await fastpath.send(tx, 4)  # full until the consumer takes one: waits
    assert got == [2, 3] and rx.receive_nowait() == 4
    await tx.aclose()
    with pytest.raises(trio.EndOfChannel):
        await fastpath.receive(rx)


async def test_holding_waits_for_a_token_and_always_gives_it_back() -> None:
    limiter = trio.CapacityLimiter(1)
    order: list[str] = []

    async def second() -> None:
        async with fastpath.Holding(limiter):
            order.append("second")

    with trio.testing.assert_no_checkpoints():
        async with fastpath.Holding(limiter):
            pass
    assert limiter.borrowed_tokens == 0
    async with trio.open_nursery() as nursery, fastpath.Holding(limiter):
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        order.append("first")  # second is still waiting for the token
    assert order == ["first", "second"] and limiter.borrowed_tokens == 0
    with pytest.raises(RuntimeError):
        async with fastpath.Holding(limiter):
            raise RuntimeError("boom")
    assert limiter.borrowed_tokens == 0


async def test_a_waiting_call_is_cancellable() -> None:
    tx, _rx = trio.open_memory_channel[int](0)
    limiter = trio.CapacityLimiter(1)
    limiter.acquire_on_behalf_of_nowait("someone else")
    with trio.move_on_after(0.01) as scope:
        await fastpath.send(tx, 1)
    assert scope.cancelled_caught
    with trio.move_on_after(0.01) as scope:
        async with fastpath.Holding(limiter):
            pass
    assert scope.cancelled_caught and limiter.borrowed_tokens == 1
