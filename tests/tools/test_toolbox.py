"""Issue 51, items 1 and 4: a cell's tools run, and every way a call can go wrong goes back to the
model as the tool's result with an error kind; results become capped text. Timeouts run on trio's
MockClock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import ToolSpec
from evalhydra.execute.toolbox import Toolbox, as_text
from evalhydra.plan.tools import LoopPlan, ToolImpl, class_tools, loop_plan

ROOT = Path(__file__).resolve().parents[2]  # tests.tools.tool_pkg imports from the repository root
INT = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
       "required": ["a", "b"]}


def box(*impls: ToolImpl, offered: tuple[ToolSpec, ...] = (), tool_class: str | None = None,
        result_chars: int = 16_000) -> Toolbox:
    return Toolbox(LoopPlan(tools=impls, tool_class=tool_class, result_chars=result_chars), offered, ROOT)


async def test_a_function_answers_and_its_arguments_are_checked_against_the_schema() -> None:
    tools = box(ToolImpl("add", "tests.tools.tool_pkg:add"), offered=(ToolSpec("add", "", INT),))
    ok = await tools.call("add", '{"a": 2, "b": 3}')
    assert (ok.text, ok.error_kind, ok.arguments) == ("5", None, {"a": 2, "b": 3})
    for arguments, kind in (('{"a": 2}', "schema_mismatch"), ('{"a": "2", "b": 3}', "schema_mismatch"),
                            ("[1, 2]", "invalid_arguments"), ("{not json", "invalid_arguments"),
                            ('{"a": NaN, "b": 1}', "invalid_arguments")):
        bad = await tools.call("add", arguments)
        assert bad.error_kind == kind and bad.text.startswith("error: "), arguments
    unknown = await tools.call("sub", "{}")
    assert unknown.error_kind == "unknown_tool" and "add" in unknown.text


async def test_a_raising_tool_is_a_result_the_model_reads() -> None:
    outcome = await box(ToolImpl("broken", "tests.tools.tool_pkg:broken")).call("broken", '{"reason": "x"}')
    assert outcome.error_kind == "tool_exception" and outcome.text == "error: RuntimeError: broken: x"


async def test_a_blocking_tool_past_its_timeout_is_left_behind() -> None:
    # a thread cannot run on the mock clock: a short real wait
    tools = box(ToolImpl("slow_sync", "tests.tools.tool_pkg:slow_sync", timeout_s=0.05))
    outcome = await tools.call("slow_sync", '{"seconds": 0.5}')
    assert outcome.error_kind == "timeout" and "longer than" in outcome.text


def test_an_async_tool_times_out_on_the_mock_clock() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> None:
        started = trio.current_time()
        outcome = await box(ToolImpl("slow_async", "tests.tools.tool_pkg:slow_async", timeout_s=30)).call(
            "slow_async", '{"seconds": 3600}')
        assert outcome.error_kind == "timeout" and trio.current_time() - started == pytest.approx(30)

    trio.run(main, clock=clock)


async def test_canned_replies_by_arguments_or_for_any_call() -> None:
    table = {'{"city":"Oslo"}': {"temp": -3}, "*": "unknown city"}
    tools = box(ToolImpl("weather", replies=table), ToolImpl("time", replies="12:00"))
    assert (await tools.call("weather", '{"city": "Oslo"}')).text == '{"temp": -3}'
    assert (await tools.call("weather", '{"city": "Rome"}')).text == "unknown city"
    assert (await tools.call("time", "")).text == "12:00"  # an empty arguments string is {}
    strict = box(ToolImpl("weather", replies={'{"city":"Oslo"}': 1}))
    assert (await strict.call("weather", '{"city": "Rome"}')).error_kind == "no_canned_reply"


async def test_results_are_text_capped_with_their_whole_hash() -> None:
    tools = box(ToolImpl("blob", "tests.tools.tool_pkg:blob"), result_chars=1000)
    assert (await tools.call("blob", '{"kind": "bytes"}')).text == "ok \\xff\\xfe"
    assert (await tools.call("blob", '{"kind": "surrogate"}')).text == "half \\udcff"
    assert (await tools.call("blob", '{"kind": "none"}')).text == ""
    assert json.loads((await tools.call("blob", '{"kind": "object"}')).text) == {"a": [1, 2]}
    big = await tools.call("blob", '{"kind": "big"}')
    import hashlib
    assert big.cut and len(big.text) == 1000 and big.sha256 == hashlib.sha256(b"x" * 50_000).hexdigest()
    assert as_text(b"\xc3\xa9") == "é"


async def test_a_tool_class_is_made_per_toolbox_and_keeps_its_state() -> None:
    specs = class_tools(__import__("tests.tools.tool_pkg", fromlist=["Counter"]).Counter, "here")
    assert [s.name for s in specs] == ["bump"]  # public methods, not state() or _hidden
    assert specs[0].parameters == {"type": "object", "properties": {"by": {"type": "integer"}},
                                   "required": []}
    first = box(ToolImpl("bump", method=True), tool_class="tests.tools.tool_pkg:Counter",
                offered=tuple(specs))
    await first.call("bump", '{"by": 2}')
    await first.call("bump", "{}")
    assert first.state() == {"count": 3}
    second = box(ToolImpl("bump", method=True), tool_class="tests.tools.tool_pkg:Counter")
    assert second.state() == {"count": 0}  # a fresh one per cell


def test_loop_settings_are_checked_with_the_fix() -> None:
    spec = {"tools": [{"name": "add", "implementation": "tests.tools.tool_pkg:add"}]}
    for loop, words in (({"max_turn": 3}, "Did you mean"), ({"max_turns": 0}, "at least 1"),
                        ({"submit_tool": "sub"}, "not an offered tool"), ({"tool_choice": "always"}, "auto"),
                        ({"max_cost_usd": -1}, "positive")):
        with pytest.raises(EvalHydraError) as caught:
            loop_plan({**spec, "loop": loop}, ROOT, "evals/x.json")
        assert words in caught.value.message + (caught.value.hint or ""), loop
    with pytest.raises(EvalHydraError, match="no tool runs"):
        loop_plan({"tools": [{"name": "add"}], "loop": {"max_turns": 2}}, ROOT, "evals/x.json")
    with pytest.raises(EvalHydraError, match="cannot be imported"):
        loop_plan({"tool_class": "tests.tools.tool_pkg:Nope"}, ROOT, "evals/x.json")
    plan, extra = loop_plan({"tool_class": "tests.tools.tool_pkg:Counter"}, ROOT, "evals/x.json")
    assert plan is not None and [t.name for t in plan.tools] == ["bump"]
    assert [t.name for t in extra] == ["bump"]
