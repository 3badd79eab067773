"""The lean transport's socket deadlines: one timer for many waits, on trio's virtual clock."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio
import trio.testing

from evalhydra.http.deadlines import _SLACK, DONE, EXPIRED, SocketDeadlines


@contextmanager
def socket_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair()
    left.setblocking(False)
    try:
        yield left, right
    finally:
        left.close()
        right.close()


async def wait_with(deadlines: SocketDeadlines, sock: socket.socket, seconds: float) -> tuple[int, float]:
    """Wait for ``sock`` to be readable under a deadline; (entry state, seconds waited)."""
    start = trio.current_time()
    entry = deadlines.arm(start + seconds, sock)
    try:
        await trio.lowlevel.wait_readable(sock)
    except trio.ClosedResourceError:
        pass
    finally:
        deadlines.disarm(entry)
    return entry[3], trio.current_time() - start


async def test_a_wait_past_its_deadline_is_woken_at_it(autojump_clock: trio.testing.MockClock) -> None:
    with socket_pair() as (left, _):
        state, waited = await wait_with(SocketDeadlines(), left, 2.0)
    assert state == EXPIRED
    assert waited == pytest.approx(2.0)


async def test_a_wait_that_ends_in_time_is_left_alone(autojump_clock: trio.testing.MockClock) -> None:
    deadlines = SocketDeadlines()
    with socket_pair() as (left, right):
        async with trio.open_nursery() as nursery:
            results: list[tuple[int, float]] = []

            async def waiter() -> None:
                results.append(await wait_with(deadlines, left, 5.0))

            nursery.start_soon(waiter)
            await trio.sleep(1.0)
            right.send(b"x")
        assert results[0] == (DONE, pytest.approx(1.0))
        await trio.sleep(10.0)  # past the old deadline: the socket still works
        assert left.recv(1) == b"x"
        state, waited = await wait_with(deadlines, left, 3.0)
    assert (state, waited) == (EXPIRED, pytest.approx(3.0))


async def test_an_earlier_deadline_armed_later_wakes_first(autojump_clock: trio.testing.MockClock) -> None:
    deadlines = SocketDeadlines()
    woke: dict[str, float] = {}
    with socket_pair() as (slow, _), socket_pair() as (fast, _):
        async def wait(name: str, sock: socket.socket, seconds: float) -> None:
            state, waited = await wait_with(deadlines, sock, seconds)
            assert state == EXPIRED
            woke[name] = waited

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "slow", slow, 30.0)
            await trio.sleep(0.5)
            nursery.start_soon(wait, "fast", fast, 1.0)
    assert woke == {"slow": pytest.approx(30.0), "fast": pytest.approx(1.0)}


async def test_finished_waits_are_dropped_so_the_heap_stays_small(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadlines = SocketDeadlines()
    with socket_pair() as (left, right):
        right.send(b"ready")  # every wait returns at once, long before its deadline
        for _ in range(5 * _SLACK):
            await wait_with(deadlines, left, 60.0)
        assert deadlines.held <= _SLACK + 1
        await trio.sleep(61.0)
        assert deadlines.held == 0


def test_each_trio_run_gets_a_timer_of_its_own() -> None:
    deadlines = SocketDeadlines()
    for _ in range(2):
        with socket_pair() as (left, _):
            state, waited = trio.run(wait_with, deadlines, left, 0.05)
        assert state == EXPIRED
        assert waited >= 0.05
