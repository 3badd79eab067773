"""Off a terminal, a status line at least every 10 s of the run's clock, whatever the cells do
(issue 46, item 5): a hung server or a rate limit still shows in a CI log."""

from __future__ import annotations

import io

import trio
import trio.testing

from evalhydra.execute.progress import HEARTBEAT_S, Progress
from evalhydra.execute.runner import _heartbeat


async def test_a_line_every_ten_seconds_while_no_cell_finishes(
        autojump_clock: trio.testing.MockClock) -> None:
    log = io.StringIO()
    progress = Progress(2000, stream=log)
    progress.extra = lambda: "limit 16/64 429s 7"
    progress.in_flight = 64
    async with trio.open_nursery() as nursery:
        await nursery.start(_heartbeat, progress)
        progress.advance(passed=True, error=False)  # the beat prints: a finished cell does not
        await trio.sleep(3.5 * HEARTBEAT_S)
        nursery.cancel_scope.cancel()
    lines = log.getvalue().splitlines()
    assert len(lines) == 3
    assert all(line.startswith("1/2000 (0%)") and "in flight=64" in line and "limit 16/64 429s 7" in line
               for line in lines), lines
    assert not progress.heartbeat_task


async def test_a_disabled_progress_prints_nothing(autojump_clock: trio.testing.MockClock) -> None:
    log = io.StringIO()
    progress = Progress(10, stream=log, enabled=False)
    with trio.move_on_after(5 * HEARTBEAT_S):
        await _heartbeat(progress)
    assert log.getvalue() == ""
