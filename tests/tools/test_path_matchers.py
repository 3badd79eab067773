"""Issue 51, item 7: the path and end-state matchers, in promptfoo's vocabulary, on a tool loop's
trajectory and on the calls an agent CLI or a single answer reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, ToolCall
from evalhydra.matchers.base import MatchContext
from evalhydra.matchers.factory import build_matcher

CALLS = [("lookup_order", {"order_id": 7}, None), ("refund", {"order_id": 7, "reason": "damaged"}, None),
         ("lookup_order", {"order_id": 8}, "tool_exception")]


def context(calls: list[tuple[str, Any, str | None]] = CALLS, state: Any = None) -> MatchContext:
    rows = [{"name": n, "parsed": a, "error_kind": e} for n, a, e in calls]
    return MatchContext(case=Case(id="c", input="x"), output="done",
                        trajectory={"tool_calls": rows, "state": state, "stop_reason": "model_stopped"})


async def verdict(spec: dict[str, Any], ctx: MatchContext) -> tuple[bool, float, str | None]:
    result = await build_matcher(spec, registry_root=Path("."), judges=None)(ctx)
    return result.passed, result.score, result.reason


@pytest.mark.parametrize(("spec", "expected"), [
    ({"kind": "tool_used", "name": "refund"}, True),
    ({"kind": "tool_used", "name": "lookup_order", "min": 3}, False),
    ({"kind": "tool_used", "name": "lookup_order", "max": 1}, False),
    ({"kind": "tool_used", "pattern": "^look", "min": 2, "max": 2}, True),
    ({"kind": "tool_used", "name": "cancel"}, False),
    ({"kind": "tool_used", "name": "cancel", "max": 0}, True),  # "never": only max means at least 0
    ({"kind": "tool_used", "name": "refund", "max": 0}, False),
    ({"kind": "tool_args", "name": "refund", "args": {"order_id": 7}}, True),
    ({"kind": "tool_args", "name": "refund", "args": {"order_id": 7}, "mode": "exact"}, False),
    ({"kind": "tool_args", "name": "refund", "args": {"order_id": 7}, "mode": "exact", "ignore": ["reason"]},
     True),
    ({"kind": "tool_args", "name": "refund", "args": {"order_id": 7.0}}, False),  # type-strict
    ({"kind": "tool_sequence", "steps": ["lookup_order", "refund"]}, True),
    ({"kind": "tool_sequence", "steps": ["refund", "lookup_order"]}, True),  # the second lookup follows
    ({"kind": "tool_sequence", "steps": ["refund", "refund"]}, False),
    ({"kind": "tool_sequence", "steps": ["lookup_order", "refund"], "mode": "exact"}, False),
    ({"kind": "tool_sequence", "steps": ["lookup_order", "refund", "cancel"], "mode": "subset"}, True),
    ({"kind": "tool_sequence", "steps": ["refund", "cancel"], "mode": "superset"}, False),
    ({"kind": "step_count", "min": 1, "max": 3}, True),
    ({"kind": "step_count", "max": 2}, False),
    ({"kind": "tool_args_valid"}, True),
    ({"kind": "no_tool_errors"}, False),
])
async def test_each_path_matcher(spec: dict[str, Any], expected: bool) -> None:
    passed, _, reason = await verdict(spec, context())
    assert passed is expected, reason
    assert passed or reason  # a failure says why


async def test_tool_call_f1_scores_the_overlap() -> None:
    passed, score, _ = await verdict({"kind": "tool_call_f1", "steps": ["lookup_order", "refund"]}, context())
    assert not passed and score == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))  # precision 2/3, recall 1
    passed, score, _ = await verdict({"kind": "tool_call_f1", "steps": ["lookup_order", "refund"],
                                      "pass_threshold": 0.75}, context())
    assert passed and score == pytest.approx(0.8)


async def test_the_end_state_is_scored_apart_from_what_was_said() -> None:
    did = context(state={"refunds": [7], "refund_count": 1})
    assert (await verdict({"kind": "state", "state": {"refund_count": 1}}, did))[0]
    assert not (await verdict({"kind": "state", "state": {"refund_count": 1}, "mode": "exact"}, did))[0]
    said_only = context(calls=[], state={"refunds": [], "refund_count": 0})
    passed, _, reason = await verdict({"kind": "state", "state": {"refund_count": 1}}, said_only)
    assert not passed and "refund_count" in str(reason)
    assert not (await verdict({"kind": "state", "state": {"x": 1}}, context()))[0]  # no state() at all


async def test_the_same_matchers_read_an_agent_clis_calls() -> None:
    ctx = MatchContext(case=Case(id="c", input="x"), output="",
                       tool_calls=(ToolCall("Read", '{"path": "a.py"}'), ToolCall("Edit", "{not json")))
    assert (await verdict({"kind": "tool_sequence", "steps": ["Read", "Edit"], "mode": "exact"}, ctx))[0]
    assert (await verdict({"kind": "tool_args", "name": "Read", "args": {"path": "a.py"}}, ctx))[0]
    assert not (await verdict({"kind": "tool_args_valid"}, ctx))[0]  # Edit's arguments are not JSON


def test_bad_options_name_the_key_and_the_fix() -> None:
    for spec, words in (({"kind": "tool_args"}, "name"), ({"kind": "tool_sequence", "steps": []}, "steps"),
                        ({"kind": "tool_used", "name": "x", "min": -1}, "min"),
                        ({"kind": "tool_sequence", "steps": ["a"], "mode": "sideways"}, "mode"),
                        ({"kind": "step_count", "maximum": 3}, "maximum"),
                        ({"kind": "tool_used", "name": "x", "min": 2, "max": 1}, "min 2 is more than max 1"),
                        ({"kind": "step_count", "min": 3, "max": 0}, "min 3 is more than max 0"),
                        ({"kind": "tool_used", "name": "x", "max": 1.5}, "'max' must be a whole number"),
                        ({"kind": "tool_used", "name": "x", "pattern": "y"}, "exactly one of 'name'"),
                        ({"kind": "tool_used"}, "exactly one of 'name' or 'pattern'")):
        with pytest.raises(EvalHydraError) as caught:
            build_matcher(spec, registry_root=Path("."), judges=None)
        assert words in caught.value.message, spec


def test_a_judge_may_be_shown_the_conversation() -> None:
    from evalhydra.matchers.judging import judged_output

    transcript = [{"role": "user", "content": "refund order 7"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call_1_0", "function": {"name": "refund", "arguments": '{"order_id":7}'}}]},
                  {"role": "tool", "tool_call_id": "call_1_0", "content": "refunded 7"},
                  {"role": "assistant", "content": "Done."}]
    ctx = MatchContext(case=Case(id="c", input="refund order 7"), output="Done.",
                       trajectory={"transcript": transcript, "tool_calls": []})
    assert judged_output(ctx, False) == "Done."  # not unless asked
    shown = judged_output(ctx, False, include_transcript=True)
    assert 'assistant calls refund({"order_id":7})' in shown and "tool: refunded 7" in shown
    assert shown.endswith("[Its final answer]\nDone.") and "refund order 7" not in shown  # the input apart
    spec = {"kind": "model_grade", "judge_service": "mock", "rubric": "r", "include_transcript": True}
    from evalhydra.matchers.factory import validate_matcher
    assert validate_matcher(spec, "here", registry_root=Path("."))["include_transcript"] is True
