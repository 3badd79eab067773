"""Matchers of a tool-using answer's path and end state, in promptfoo's vocabulary.

They read the calls a tool loop made (``ctx.trajectory``: each call's name, parsed arguments
and error kind) or, for an agent CLI or a single answer, the calls it reported
(``ctx.tool_calls``), so one config scores both:

* ``tool_used`` ``{name | pattern, min, max}``: how many calls a tool (or tools matching a
  regular expression) got; ``min`` is 1 unless only ``max`` is given (``max: 0``: never called).
* ``tool_args`` ``{name, args, mode: partial | exact, ignore}``: some call of ``name`` had these
  arguments (``partial``: those keys with those values; ``exact``: nothing else; ``ignore``:
  keys left out of both).
* ``tool_sequence`` ``{steps, mode: in_order | exact | subset | superset}``: the called names
  hold ``steps`` in order (others may come between), are exactly them, are all among them, or
  include every one of them.
* ``step_count`` ``{min, max}``: how many calls were made.
* ``tool_call_f1`` ``{steps, pass_threshold: 1.0}``: F1 of the called names against ``steps``
  (as multisets); the score is the F1.
* ``tool_args_valid``: no call named an unknown tool or sent arguments that are not a JSON
  object fitting the offered schema.
* ``no_tool_errors``: no call ended in an error (bad arguments, a raised exception, a timeout…).
* ``state`` ``{state, mode: partial | exact}``: the tool class's ``state()`` at the end of the
  cell holds ``state`` ("did it", apart from "said it did").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from evalhydra.core import strictjson
from evalhydra.core.values import MatchResult, arguments_or_empty
from evalhydra.matchers.base import MatchContext, Matcher, sync_matcher
from evalhydra.matchers.common import fail, passed
from evalhydra.matchers.toolcall import json_equal

__all__ = ["PATH_KINDS", "build_path_matcher"]

#: Argument problems ``tool_args_valid`` fails on.
_INVALID = {"unknown_tool", "invalid_arguments", "schema_mismatch"}


def _calls(ctx: MatchContext) -> list[dict[str, Any]]:
    """Each call: ``name``, parsed ``arguments`` (None when not a JSON object) and ``error_kind``."""
    trajectory = ctx.trajectory
    if trajectory is not None:
        return [{"name": c.get("name"), "arguments": c.get("parsed"), "error_kind": c.get("error_kind")}
                for c in trajectory.get("tool_calls") or []]
    out = []
    for call in ctx.tool_calls:
        try:
            parsed = strictjson.loads_plain(arguments_or_empty(call.arguments))
        except ValueError:
            parsed = None
        valid = isinstance(parsed, dict)
        out.append({"name": call.name, "arguments": parsed if valid else None,
                    "error_kind": None if valid else "invalid_arguments"})
    return out


def _within(count: int, low: int | None, high: int | None) -> bool:
    return (low is None or count >= low) and (high is None or count <= high)


def _bounds(spec: Mapping[str, Any], low: int | None) -> str:
    parts = [f"at least {spec.get('min', low)}" if spec.get("min", low) is not None else "",
             f"at most {spec['max']}" if spec.get("max") is not None else ""]
    return " and ".join(p for p in parts if p)


def used_bounds(spec: Mapping[str, Any]) -> tuple[int, int | None]:
    """``tool_used``'s (min, max): ``min`` 1 by default, 0 when only ``max`` is given."""
    return spec.get("min", 0 if spec.get("max") is not None else 1), spec.get("max")


def _tool_used(spec: Mapping[str, Any]) -> Matcher:
    name, pattern = spec.get("name"), spec.get("pattern")
    regex = re.compile(pattern) if pattern else None
    low, high = used_bounds(spec)

    def match(ctx: MatchContext) -> MatchResult:
        names = [c["name"] for c in _calls(ctx)]
        count = sum(1 for n in names if (regex.search(n or "") if regex else n == name))
        if _within(count, low, high):
            return passed(details={"calls": count})
        what = f"/{pattern}/" if regex else repr(name)
        listed = ", ".join(map(str, names)) or "none"
        return fail(f"{what} was called {count} time(s), not {_bounds(spec, low)} (calls: {listed})")

    return sync_matcher(match)


def _args_match(actual: Any, expected: Mapping[str, Any], mode: str, ignore: set[str]) -> bool:
    if not isinstance(actual, dict):
        return False
    actual = {k: v for k, v in actual.items() if k not in ignore}
    wanted = {k: v for k, v in expected.items() if k not in ignore}
    if mode == "exact" and set(actual) != set(wanted):
        return False
    return all(k in actual and json_equal(actual[k], v) for k, v in wanted.items())


def _tool_args(spec: Mapping[str, Any]) -> Matcher:
    name, expected = spec["name"], spec.get("args") or {}
    mode, ignore = spec.get("mode") or "partial", set(spec.get("ignore") or ())

    def match(ctx: MatchContext) -> MatchResult:
        calls = [c for c in _calls(ctx) if c["name"] == name]
        if any(_args_match(c["arguments"], expected, mode, ignore) for c in calls):
            return passed()
        if not calls:
            return fail(f"{name!r} was never called")
        return fail(f"no call of {name!r} had the arguments {expected} ({mode}); it was called with "
                    + "; ".join(str(c["arguments"]) for c in calls[:5]))

    return sync_matcher(match)


def _in_order(names: list[str], steps: list[str]) -> bool:
    walk = iter(names)
    return all(step in walk for step in steps)


def _tool_sequence(spec: Mapping[str, Any]) -> Matcher:
    steps, mode = list(spec["steps"]), spec.get("mode") or "in_order"
    checks = {"in_order": lambda n: _in_order(n, steps), "exact": lambda n: n == steps,
              "subset": lambda n: set(n) <= set(steps), "superset": lambda n: set(steps) <= set(n)}

    def match(ctx: MatchContext) -> MatchResult:
        names = [str(c["name"]) for c in _calls(ctx)]
        if checks[mode](names):
            return passed()
        return fail(f"the calls {names} do not hold {steps} ({mode})")

    return sync_matcher(match)


def _step_count(spec: Mapping[str, Any]) -> Matcher:
    low, high = spec.get("min"), spec.get("max")

    def match(ctx: MatchContext) -> MatchResult:
        count = len(_calls(ctx))
        if _within(count, low, high):
            return passed(details={"calls": count})
        return fail(f"{count} tool call(s), not {_bounds(spec, None)}")

    return sync_matcher(match)


def _tool_call_f1(spec: Mapping[str, Any]) -> Matcher:
    expected, threshold = Counter(spec["steps"]), float(spec.get("pass_threshold", 1.0))

    def match(ctx: MatchContext) -> MatchResult:
        actual = Counter(str(c["name"]) for c in _calls(ctx))
        hits = sum((actual & expected).values())
        precision = hits / sum(actual.values()) if actual else 0.0
        recall = hits / sum(expected.values()) if expected else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        details = {"precision": precision, "recall": recall}
        if f1 >= threshold:
            return passed(f1, details)
        return fail(f"tool-call F1 {f1:.3f} below {threshold:g} (calls: {dict(actual)}; expected: "
                    f"{dict(expected)})", f1, details)

    return sync_matcher(match)


def _errors_absent(kinds: set[str] | None, label: str) -> Matcher:
    def match(ctx: MatchContext) -> MatchResult:
        bad = [c for c in _calls(ctx) if c["error_kind"] and (kinds is None or c["error_kind"] in kinds)]
        if not bad:
            return passed()
        named = "; ".join(f"{c['name']} ({c['error_kind']})" for c in bad[:5])
        return fail(f"{len(bad)} call(s) {label}: {named}")

    return sync_matcher(match)


def _state(spec: Mapping[str, Any]) -> Matcher:
    expected, mode = spec.get("state") or {}, spec.get("mode") or "partial"

    def match(ctx: MatchContext) -> MatchResult:
        state = (ctx.trajectory or {}).get("state")
        if state is None:
            return fail("no end state: the eval's tool_class has no state() (or the cell ran no tool loop)")
        if isinstance(expected, Mapping) and _args_match(state, expected, mode, set()):
            return passed()
        if not isinstance(expected, Mapping) and json_equal(state, expected):
            return passed()
        return fail(f"the end state {state} does not hold {expected} ({mode})")

    return sync_matcher(match)


#: Path and state matcher kinds, each built from its cleaned spec.
PATH_KINDS = {
    "tool_used": _tool_used,
    "tool_args": _tool_args,
    "tool_sequence": _tool_sequence,
    "step_count": _step_count,
    "tool_call_f1": _tool_call_f1,
    "tool_args_valid": lambda spec: _errors_absent(_INVALID, "had invalid arguments or an unknown tool"),
    "no_tool_errors": lambda spec: _errors_absent(None, "ended in an error"),
    "state": _state,
}


def build_path_matcher(spec: Mapping[str, Any]) -> Matcher:
    """The matcher of a path or state ``kind`` (:data:`PATH_KINDS`)."""
    return PATH_KINDS[spec["kind"]](spec)
