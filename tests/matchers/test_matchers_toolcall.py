"""tool_call: distinct order-free matching, type-strict equality, ranked reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalhydra.core.values import Case, ExpectedToolCall, ToolCall
from evalhydra.matchers import MatchContext, build_matcher
from evalhydra.matchers.toolcall import assign_distinct, json_equal, tool_call_match

E = ExpectedToolCall
A = ToolCall


@pytest.mark.parametrize(
    ("expected", "actual", "reason"),
    [
        ([], [A("search", "{}")], "missing expected tool calls"),
        ([E("search")], [], "missing tool call"),
        ([E("search")], [A("search", "{}")], None),
        ([E("search")], [A("fetch", "{}")], "wrong tool name"),
        # extra calls and extra argument keys are fine
        ([E("search", '{"q":"x"}')], [A("fetch", "{}"), A("search", '{"q":"x","n":3}')], None),
        # order does not matter
        ([E("a"), E("b")], [A("b", "{}"), A("a", "{}")], None),
        # duplicates need distinct calls
        ([E("a"), E("a")], [A("a", "{}")], "wrong tool name"),
        ([E("a"), E("a")], [A("a", "{}"), A("a", "{}")], None),
        # the greedy choice would take call 0 for the first expected call; backtracking fixes it
        (
            [E("a"), E("a", '{"k":1}')],
            [A("a", '{"k":1}'), A("a", '{"k":2}')],
            None,
        ),
        (
            [E("a", '{"k":1}'), E("a", '{"k":1}')],
            [A("a", '{"k":1}'), A("a", '{"k":2}')],
            "tool argument value mismatch",
        ),
        # type-strict equality
        ([E("a", '{"n":1}')], [A("a", '{"n":1.0}')], "tool argument value mismatch"),
        ([E("a", '{"n":1.0}')], [A("a", '{"n":1}')], "tool argument value mismatch"),
        ([E("a", '{"n":true}')], [A("a", '{"n":1}')], "tool argument value mismatch"),
        ([E("a", '{"n":null}')], [A("a", '{"n":null}')], None),
        ([E("a", '{"l":[1,2]}')], [A("a", '{"l":[2,1]}')], "tool argument value mismatch"),
        ([E("a", '{"o":{"x":1}}')], [A("a", '{"o":{"x":1,"y":2}}')], "tool argument value mismatch"),
        ([E("a", '{"o":{"x":1}}')], [A("a", '{"o":{"x":1}}')], None),
        # argument errors
        ([E("a", '{"q":"x"}')], [A("a", '{"other":1}')], "missing expected argument field"),
        ([E("a", '{"q":"x"}')], [A("a", "not json")], "invalid arguments json"),
        ([E("a", '{"q":"x"}')], [A("a", "[1]")], "arguments json is not object"),
        ([E("a", "[1]")], [A("a", "{}")], "expected arguments json is not object"),
        ([E("a", "{bad")], [A("a", "{}")], "invalid expected arguments json"),
        # ranking: the highest-ranked error over the same-name calls wins
        (
            [E("a", '{"q":"x"}')],
            [A("a", '{"q":"y"}'), A("a", "{}")],
            "missing expected argument field",
        ),
        (
            [E("a", '{"q":"x"}')],
            [A("a", '{"q":"y"}'), A("a", "oops"), A("a", "{}")],
            "invalid arguments json",
        ),
        # zig_eval: "wrong tool name" only when no pair of matching names had an argument error
        ([E("a", '{"q":1}'), E("b")], [A("a", '{"q":2}')], "tool argument value mismatch"),
        ([E("a"), E("b")], [A("a", "{}")], "wrong tool name"),
        # the highest-ranked error seen anywhere in the search wins, a matched call's too
        (
            [E("a", '{"q":1}'), E("b", '{"u":1}')],
            [A("a", "broken"), A("a", '{"q":1}'), A("b", '{"u":2}')],
            "invalid arguments json",
        ),
        # the search never reaches an expected call after one that cannot be placed
        ([E("a", '{"q":1}'), E("b", '{"u":1}')], [A("a", '{"q":2}'), A("b", "broken")],
         "tool argument value mismatch"),
        # actual arguments are parsed first; expected keys are checked in order, first problem wins
        ([E("a", "{bad")], [A("a", "oops")], "invalid arguments json"),
        ([E("a", '{"x":1,"y":2}')], [A("a", '{"x":2}')], "tool argument value mismatch"),
        ([E("a", '{"y":2,"x":1}')], [A("a", '{"x":2}')], "missing expected argument field"),
        # a whitespace-only arguments_json is absent: the name alone decides
        ([E("a", " \t\n")], [A("a", "not json")], None),
    ],
)
def test_tool_call_match(expected: list, actual: list, reason: str | None) -> None:
    result = tool_call_match(expected, actual)
    assert (result.passed, result.reason, result.score) == (reason is None, reason, float(reason is None))


def test_assignment_is_reported() -> None:
    result = tool_call_match([E("a"), E("b")], [A("b", "{}"), A("a", "{}")])
    assert result.details == {"assignment": [1, 0]}


@pytest.mark.parametrize(
    ("candidates", "found"),
    [([[0, 1], [0]], [1, 0]), ([[0], [0]], None), ([], []), ([[2], [1, 2], [0, 1]], [2, 1, 0])],
)
def test_assign_distinct(candidates: list, found: list | None) -> None:
    assert assign_distinct(candidates) == found


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1, True),
        (1, 1.0, False),
        (True, 1, False),
        (False, 0, False),
        (0.5, 0.5, True),
        ("1", 1, False),
        (None, None, True),
        ([1, [2]], [1, [2]], True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
    ],
)
def test_json_equal(a: object, b: object, equal: bool) -> None:
    assert json_equal(a, b) is equal


async def test_built_tool_call_matcher_reads_case_and_calls(tmp_path: Path) -> None:
    matcher = build_matcher({"kind": "tool_call"}, registry_root=tmp_path, judges=None)
    case = Case(
        id="c",
        input="Search the web for the weather in Melbourne.",
        expected_tool_calls=(E("search_web", '{"query":"weather melbourne"}'),),
    )
    call = A("search_web", '{"query":"weather melbourne"}')
    assert (await matcher(MatchContext(case=case, output="", tool_calls=(call,)))).passed
    missing = await matcher(MatchContext(case=case, output="sunny"))
    assert missing.reason == "missing tool call"
