"""An endpoint that accepts connections and never answers is named within two timeouts (issue
46, item 4): until it has answered once, a timed-out attempt is retried by one probe, not by
every cell in parallel, and when the probe times out too every waiting cell ends at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
import trio.testing

from evalhydra.services.adaptive import EndpointController, EndpointSilent, Feedback
from tests.helpers import mock_process, numbered_registry, run_cli

TIMED_OUT = Feedback(ok=False, timed_out=True)


async def test_a_timeout_before_any_answer_leaves_one_probe_then_the_endpoint_is_silent(
        autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(64)
    first_wave = [await gate.acquire() for _ in range(64)]
    await trio.sleep(60)
    for sent in first_wave:
        gate.release(sent, TIMED_OUT)
    assert gate.current == 1 and not gate.silent
    probe = await gate.acquire()
    with trio.move_on_after(1):  # a second request waits for the probe
        await gate.acquire()
        pytest.fail("a second request went out while the probe was in flight")
    await trio.sleep(60)
    gate.release(probe, TIMED_OUT)
    assert gate.silent
    with pytest.raises(EndpointSilent):
        await gate.acquire()
    await trio.sleep(61)  # silent as long as the probe waited (61 s); then one new probe may go
    again = await gate.acquire()
    assert gate.current == 1
    gate.release(again, Feedback())  # the server came up
    assert gate.current == 64 and not gate.silent


async def test_an_answer_to_the_probe_restores_the_requested_concurrency(
        autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(64)
    gate.release(await gate.acquire(), TIMED_OUT)  # a model still loading
    assert gate.current == 1
    gate.release(await gate.acquire(), Feedback())
    assert gate.current == 64 and gate.answered
    gate.release(await gate.acquire(), TIMED_OUT)  # a slow reply of a live server: no probing
    assert gate.current == 64 and not gate.silent


@pytest.mark.slow
def test_two_thousand_cells_against_a_hung_server_end_within_two_timeouts(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 500)
    with mock_process("--hang-rate", "1") as url:
        started = time.monotonic()
        res = run_cli(f"registry={registry}", "eval=g.e", "trials=4", "service=mock",
                      "service.mock.enabled=false", f"service.base_url={url}", "service.timeout_ms=3000",
                      "service.retry.max_attempts=4", "run.progress=false", cwd=tmp_path, timeout=120)
        wall = time.monotonic() - started
    assert res.returncode == 3, res.stdout + res.stderr
    assert wall < 2 * 3 + 10, wall
    assert "connected, but no reply within 3 s: is the server hung or still loading a model?" in res.stderr
    fix = next(line for line in res.stdout.splitlines() + res.stderr.splitlines() if "never replied" in line)
    assert "timeout" not in fix.split("never replied", 1)[1]  # the fix is not "raise the timeout"
