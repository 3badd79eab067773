"""The ``bfcl_ast`` matcher: the answer's function calls against a BFCL ground truth.

The case's ideal is BFCL's ground truth, ``[{function: {parameter: [acceptable values]}}]``
(:mod:`evalhydra.registry.bfcl` puts it there). As BFCL's AST checker does: the answer makes
exactly as many calls as the ground truth lists, each matched to a distinct one (in any order)
with the same function name; every parameter it passes is one the ground truth names, with one
of the acceptable values; a parameter it leaves out must list ``""`` (optional). Values compare
as BFCL standardises them: numbers by value (an integer for a float), strings case-folded with
spaces and ``,./-_*^`` removed, lists item by item, objects key by key.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from evalhydra.core import strictjson
from evalhydra.core.values import MatchResult, arguments_or_empty
from evalhydra.matchers.base import MatchContext, Matcher, sync_matcher
from evalhydra.matchers.common import fail, passed

__all__ = ["build_bfcl_ast"]

#: The most calls matched by trying every order (BFCL's parallel categories stay far below it).
MAX_CALLS = 7
_STRIPPED = re.compile(r"[ ,./\-_*^]")


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(actual, bool) or isinstance(expected, bool):
        return actual is expected
    if isinstance(actual, int | float) and isinstance(expected, int | float):
        return float(actual) == float(expected)
    if isinstance(actual, str) and isinstance(expected, str):
        return _STRIPPED.sub("", actual).casefold() == _STRIPPED.sub("", expected).casefold()
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(_same(a, e)
                                                    for a, e in zip(actual, expected, strict=True))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return set(actual) == set(expected) and all(
            _accepted(actual[k], expected[k]) for k in actual)
    return bool(actual == expected)


def _accepted(actual: Any, options: Any) -> bool:
    """Whether ``actual`` is one of ``options`` (a list of acceptable values, or one value)."""
    return any(_same(actual, o) for o in options) if isinstance(options, list) else _same(actual, options)


def _problem(name: str, arguments: Any, expected: dict[str, Any]) -> str | None:
    """Why a call of ``name`` with ``arguments`` does not fit ``expected`` (None: it does)."""
    if not isinstance(arguments, dict):
        return f"{name}: the arguments are not a JSON object"
    extra = sorted(set(arguments) - set(expected))
    if extra:
        return f"{name}: unexpected parameter {extra[0]!r}"
    for param, options in expected.items():
        if param not in arguments:
            if not (isinstance(options, list) and "" in options):
                return f"{name}: missing required parameter {param!r}"
        elif not _accepted(arguments[param], options):
            return f"{name}: {param}={arguments[param]!r} is not one of {options!r}"
    return None


def _truth(ideal: str | None) -> list[tuple[str, dict[str, Any]]] | None:
    try:
        value = strictjson.loads_plain(ideal or "")
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, dict) and len(v) == 1 for v in value):
        return None
    return [next(iter(v.items())) for v in value]


def bfcl_ast_match(ctx: MatchContext) -> MatchResult:
    """Score the answer's calls against the case's BFCL ground truth."""
    truth = _truth(ctx.case.ideal)
    if truth is None:
        return fail("the case has no BFCL ground truth ([{function: {parameter: [values]}}]) as its ideal")
    calls = []
    for call in ctx.tool_calls:
        try:
            calls.append((call.name, strictjson.loads_plain(arguments_or_empty(call.arguments))))
        except ValueError:
            calls.append((call.name, None))
    if len(calls) != len(truth):
        return fail(f"{len(calls)} function call(s), the ground truth has {len(truth)}")
    if len(calls) > MAX_CALLS:
        return fail(f"more than {MAX_CALLS} calls: too many to match in every order")
    first_problem = None
    for order in itertools.permutations(calls):
        problems = [(_problem(name, arguments, params) if name == want else f"wrong function {name!r}")
                    for (name, arguments), (want, params) in zip(order, truth, strict=True)]
        found = next((p for p in problems if p), None)
        if found is None:
            return passed()
        first_problem = first_problem or found
    return fail(first_problem or "no call matches")


def build_bfcl_ast(spec: dict[str, Any]) -> Matcher:
    """The ``bfcl_ast`` matcher (no options)."""
    return sync_matcher(bfcl_ast_match)
