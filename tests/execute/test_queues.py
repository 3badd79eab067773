"""The runner's queues: jobs to the workers (JobQueue) and rows to the writer (RowSink)."""

from __future__ import annotations

import trio
import trio.testing

from evalhydra.execute.jobqueue import JobQueue
from evalhydra.execute.writer import RowSink


async def test_workers_take_queued_jobs_without_a_switch_and_wait_when_it_is_empty() -> None:
    queue = JobQueue[int](low=2)
    got: list[int | None] = []

    async def worker() -> None:
        while (job := await queue.get()) is not None:
            got.append(job)
        got.append(None)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker)
        await trio.testing.wait_all_tasks_blocked()  # empty: the worker waits
        assert got == []
        with trio.testing.assert_no_checkpoints():
            await queue.put([1])  # below low: the producer does not wait
        await trio.testing.wait_all_tasks_blocked()
        assert got == [1]
        queue.close()
    assert got == [1, None]
    with trio.testing.assert_no_checkpoints():
        assert await queue.get() is None


async def test_the_producer_waits_until_the_queue_runs_low() -> None:
    queue = JobQueue[int](low=2)
    put_done = trio.Event()

    async def producer() -> None:
        await queue.put([1, 2, 3, 4])
        put_done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        await trio.testing.wait_all_tasks_blocked()
        assert not put_done.is_set() and len(queue) == 4
        with trio.testing.assert_no_checkpoints():
            assert [await queue.get(), await queue.get()] == [1, 2]
        await trio.testing.wait_all_tasks_blocked()
        assert not put_done.is_set()  # two left: not yet below low
        assert await queue.get() == 3
        await trio.testing.wait_all_tasks_blocked()
        assert put_done.is_set()  # one left: the next chunk can be claimed now
    assert await queue.get() == 4


async def test_rows_wait_only_when_two_batches_are_pending() -> None:
    sink = RowSink(batch_size=2)
    with trio.testing.assert_no_checkpoints():
        await sink.put(members=[("r", "a")])
        await sink.put(members=[("r", "b")])
        await sink.put(members=[("r", "c")])
    blocked = trio.Event()

    async def fourth() -> None:
        await sink.put(members=[("r", "d")])  # four pending = two batches: waits for the writer
        blocked.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fourth)
        await trio.testing.wait_all_tasks_blocked()
        assert not blocked.is_set()
        batch = sink.take()
        await trio.testing.wait_all_tasks_blocked()
        assert blocked.is_set()
    assert [key for _, key in batch.members] == ["a", "b", "c", "d"]
    assert len(sink.pending) == 0


async def test_the_writer_waits_for_a_batch_or_the_interval_and_never_spins_while_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sink = RowSink(batch_size=3)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sink.wait, 0.25)
        await trio.sleep(10)  # nothing pending: no timer runs, the writer sleeps
        assert nursery.child_tasks
        await sink.put(members=[("r", "a")])
        await trio.sleep(0.1)
        assert nursery.child_tasks  # one row: the interval has not passed
    assert trio.current_time() - start == 10.25  # returned 0.25 s after the first row
    with trio.move_on_after(1) as scope:
        await sink.put(members=[("r", "b"), ("r", "c")])
        await sink.wait(100)  # a full batch: at once
    assert not scope.cancelled_caught
    sink.take()
    sink.close()
    before = trio.current_time()
    await sink.wait(100)  # closed: nothing to wait for
    assert trio.current_time() == before


async def test_a_hurried_sink_hands_each_row_to_the_writer_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sink = RowSink(batch_size=100)
    await sink.put(members=[("r", "a")])
    sink.hurry()  # the run's last cells are in flight
    start = trio.current_time()
    await sink.wait(100)  # a row is pending: at once, not after the interval
    assert trio.current_time() == start
    assert [key for _, key in sink.take().members] == ["a"]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sink.wait, 100)
        await trio.sleep(5)  # nothing pending: the writer still sleeps
        assert nursery.child_tasks
        await sink.put(members=[("r", "b")])
    assert trio.current_time() == start + 5  # the next row, as soon as it came
