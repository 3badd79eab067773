"""Issue 59, D15: a loop's end state is read off the event loop, in bounded time and size, and its
stored transcript is bounded."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from evalhydra.core.values import Completion
from evalhydra.execute.toolbox import MAX_STATE_CHARS, STATE_TIMEOUT_S, Toolbox
from evalhydra.execute.toolloop import MAX_TRANSCRIPT_CHARS, LoopOutcome
from evalhydra.plan.tools import LoopPlan

STATES = '''
import threading

GATE = threading.Event()


class Stuck:
    def look(self) -> str:
        """Look."""
        return "ok"

    def state(self) -> dict:
        GATE.wait(60)
        return {"late": True}


class Huge:
    def look(self) -> str:
        """Look."""
        return "ok"

    def state(self) -> dict:
        return {"rows": ["x" * 1000] * 2000}
'''


@pytest.fixture
def states(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "loop_states.py").write_text(STATES)
    yield tmp_path
    module = sys.modules.pop("loop_states", None)
    if module is not None:
        module.GATE.set()  # the abandoned thread ends with the test


def test_a_state_that_blocks_is_abandoned_at_its_timeout_without_holding_the_event_loop(states: Path) -> None:
    toolbox = Toolbox(LoopPlan(tool_class="loop_states:Stuck"), (), states)
    ticks = []

    async def main() -> object:
        async with trio.open_nursery() as nursery:
            async def tick() -> None:
                while True:
                    ticks.append(trio.current_time())
                    await trio.sleep(1)
            nursery.start_soon(tick)
            state = await toolbox.final_state()
            nursery.cancel_scope.cancel()
        return state

    state = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert state == {"error": f"state() took longer than {STATE_TIMEOUT_S:g} s"}
    assert len(ticks) >= STATE_TIMEOUT_S  # the loop kept running while state() blocked its thread


def test_an_end_state_over_its_cap_is_an_error_naming_its_size(states: Path) -> None:
    toolbox = Toolbox(LoopPlan(tool_class="loop_states:Huge"), (), states)
    state = trio.run(toolbox.final_state)
    assert isinstance(state, dict) and state["error"].startswith("the end state is 2,0")
    assert f"over the cap of {MAX_STATE_CHARS:,}" in state["error"]


def test_a_transcript_over_its_cap_keeps_every_message_with_its_text_cut() -> None:
    big = "y" * (MAX_TRANSCRIPT_CHARS // 2)
    messages = [{"role": "user", "content": "go"}] + [
        {"role": "assistant", "content": big,
         "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": big}}]},
        {"role": "tool", "tool_call_id": "c", "content": big}] * 3
    kept = LoopOutcome(Completion(output="", model=""), messages=messages).trajectory()["transcript"]
    assert len(kept) == len(messages) and kept[0]["content"] == "go"
    assert len(json.dumps(kept)) <= MAX_TRANSCRIPT_CHARS + 10_000
    assert kept[1]["content"].endswith(f"… [cut: {len(big):,} characters stored in part]")
    assert kept[1]["tool_calls"][0]["function"]["arguments"].endswith("stored in part]")
