"""The ``tool_call`` matcher (zig_eval).

Every expected call must be matched to a **distinct** actual call, in any
order. A pair matches when the names are equal and, if the expected call has
``arguments_json``, every expected root key is present in the actual arguments
with a deep-equal value. Equality is type-strict (``1`` ≠ ``1.0``, ``true`` ≠
``1``), arrays compare in order and nested objects need equal key sets. Extra
argument keys and extra calls are allowed.

Failure reasons, as in zig_eval: ``missing expected tool calls`` (the case has
none), ``missing tool call`` (the model made none), otherwise the
highest-ranked argument error seen for any pair of matching names in the
search, and ``wrong tool name`` when there was none (no expected name matched
an actual call, or calls of the right names ran out)::

    invalid expected arguments json
      > invalid arguments json | arguments json is not object
        | expected arguments json is not object
      > missing expected argument field
      > tool argument value mismatch
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from evalhydra.core import strictjson
from evalhydra.core.values import ExpectedToolCall, MatchResult, ToolCall, arguments_or_empty
from evalhydra.matchers.base import MatchContext, Matcher, sync_matcher
from evalhydra.matchers.common import ASCII_WHITESPACE, fail, passed

__all__ = [
    "ARGUMENT_ERROR_RANK",
    "argument_error",
    "assign_distinct",
    "build_tool_call",
    "json_equal",
    "tool_call_match",
]

#: Rank of each argument error; the highest one found is reported.
ARGUMENT_ERROR_RANK: dict[str, int] = {
    "invalid expected arguments json": 3,
    "invalid arguments json": 2,
    "arguments json is not object": 2,
    "expected arguments json is not object": 2,
    "missing expected argument field": 1,
    "tool argument value mismatch": 0,
}


def json_equal(expected: Any, actual: Any) -> bool:
    """Type-strict deep equality of parsed JSON values (1 ≠ 1.0, True ≠ 1)."""
    if type(expected) is not type(actual):
        return False
    if isinstance(expected, dict):
        return expected.keys() == actual.keys() and all(
            json_equal(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return len(expected) == len(actual) and all(
            json_equal(e, a) for e, a in zip(expected, actual, strict=True)
        )
    return bool(expected == actual)


def _parse_object(text: str, invalid: str, not_object: str) -> tuple[dict[str, Any] | None, str]:
    try:
        value = strictjson.loads(text)
    except ValueError:
        return None, invalid
    if not isinstance(value, dict):
        return None, not_object
    return value, ""


def argument_error(expected_json: str | None, actual_json: str) -> str | None:
    """Why the actual arguments fail the expected ones, or None (zig_eval's order).

    The actual arguments are parsed before the expected ones, and the expected
    keys are checked in their order: the first key that is missing or differs
    gives the reason. A whitespace-only ``expected_json`` counts as absent.
    """
    if expected_json is None or not expected_json.strip(ASCII_WHITESPACE):
        return None
    actual, error = _parse_object(actual_json, "invalid arguments json", "arguments json is not object")
    if actual is None:
        return error
    expected, error = _parse_object(
        expected_json, "invalid expected arguments json", "expected arguments json is not object"
    )
    if expected is None:
        return error
    for key, value in expected.items():
        if key not in actual:
            return "missing expected argument field"
        if not json_equal(value, actual[key]):
            return "tool argument value mismatch"
    return None


def assign_distinct(candidates: Sequence[Sequence[int]]) -> list[int] | None:
    """Give every expected index a distinct candidate actual index, or None.

    A backtracking search (augmenting paths), so it finds an assignment
    whenever one exists, whatever the order of the calls.
    """
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(candidates)):
        if not place(i, set()):
            return None
    assignment = [0] * len(candidates)
    for j, i in owner.items():
        assignment[i] = j
    return assignment


def _worst_error(errors: list[dict[int, str | None]]) -> str:
    """The highest-ranked argument error seen for any pair with matching names.

    ``wrong tool name`` when no pair had an argument error: no expected name
    matched an actual call, or calls of the right names ran out (duplicates).
    """
    worst: str | None = None
    for row in errors:
        for error in row.values():
            if error is not None and (worst is None
                                      or ARGUMENT_ERROR_RANK[error] > ARGUMENT_ERROR_RANK[worst]):
                worst = error
    return worst or "wrong tool name"


def tool_call_match(expected: Sequence[ExpectedToolCall], actual: Sequence[ToolCall]) -> MatchResult:
    """Match expected tool calls to distinct actual calls, order-free.

    Returns:
        Score 1 with ``details["assignment"]`` (the actual index of each
        expected call), or 0 with one of zig_eval's failure reasons.
    """
    if not expected:
        return fail("missing expected tool calls")
    if not actual:
        return fail("missing tool call")
    by_name = [[j for j, a in enumerate(actual) if a.name == e.name] for e in expected]
    errors = [
        {j: argument_error(e.arguments_json, actual[j].arguments) for j in names}
        for e, names in zip(expected, by_name, strict=True)
    ]
    full = [[j for j, error in row.items() if error is None] for row in errors]
    assignment = assign_distinct(full)
    if assignment is not None:
        return passed(details={"assignment": assignment})
    return fail(_worst_error(errors[:_levels_reached(full)]))


def _levels_reached(full: list[list[int]]) -> int:
    """How many expected calls zig_eval's in-order backtracking search gets to try.

    The search tries expected call ``i`` only once calls ``0..i-1`` hold distinct
    full matches, so argument errors of later calls are never seen.
    """
    for level in range(1, len(full)):
        if assign_distinct(full[:level]) is None:
            return level
    return len(full)


def build_tool_call(spec: dict[str, Any]) -> Matcher:
    """Build a ``tool_call`` matcher.

    ``strict_arguments: true`` (set for every eval of a zig_eval-layout registry) reads each
    call's arguments exactly as sent, as zig_eval does: an empty string is ``invalid arguments
    json``. Otherwise an empty or blank string means ``{}``, as tool loops read it.

    """
    strict = spec.get("strict_arguments", False)  # checked by the options' checks

    def match(ctx: MatchContext) -> MatchResult:
        calls = ctx.tool_calls if strict else tuple(
            replace(call, arguments=arguments_or_empty(call.arguments)) for call in ctx.tool_calls)
        return tool_call_match(ctx.case.expected_tool_calls, calls)

    return sync_matcher(match)
