"""The shared value types: immutable ones compare and hash by value, as frozen dataclasses do."""

from __future__ import annotations

import dataclasses

import pytest

from evalhydra.core.values import (
    AttemptRecord,
    Case,
    Completion,
    ErrorKind,
    MatchResult,
    ToolCall,
    Usage,
    immutable,
)
from evalhydra.matchers.base import MatchContext
from evalhydra.plan.cells import CellJob


def test_equal_values_are_equal_and_hash_alike() -> None:
    one = Completion(output="a", model="m", tool_calls=(ToolCall("f", "{}"),), usage=Usage(1, 2, 0))
    two = Completion(output="a", model="m", tool_calls=(ToolCall("f", "{}"),), usage=Usage(1, 2, 0))
    assert one == two and hash(one) == hash(two) and len({one, two}) == 1
    assert one != dataclasses.replace(one, output="b")
    record = AttemptRecord(1, 500, ErrorKind.SERVER_ERROR, 3.5)
    assert {record: 1}[AttemptRecord(1, 500, ErrorKind.SERVER_ERROR, 3.5)] == 1


def test_replace_makes_a_new_value_and_leaves_the_old_one() -> None:
    result = MatchResult(passed=True, score=1.0)
    failed = dataclasses.replace(result, passed=False, reason="no")
    assert (result.passed, result.reason) == (True, None) and (failed.passed, failed.reason) == (False, "no")
    assert Usage(1, 2, 3) + Usage(1, 1, 1) == Usage(2, 3, 4)


def test_slots_and_keywords_are_as_declared() -> None:
    case = Case(id="c1", input="hi")
    context = MatchContext(case=case, output="x")
    with pytest.raises(AttributeError):
        context.extra = 1  # type: ignore[attr-defined]  # slots: no new attributes
    with pytest.raises(TypeError):
        CellJob(key="k", eval=None, case=case, trial=1, model="m", other=2)  # type: ignore[call-arg,arg-type]

    @immutable(kw_only=True)
    class Point:
        x: int
        y: int = 0

    with pytest.raises(TypeError):
        Point(1)  # type: ignore[misc]  # kw_only
    assert Point(x=1) == Point(x=1, y=0) and hash(Point(x=1)) == hash(Point(x=1, y=0))
