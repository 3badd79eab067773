"""The chat-completions checks: each reads the probes' exchanges and says pass, fail or
not applicable (the server refused a feature it does not offer, with 4xx), with the evidence.

A check never fails for what the model chose to say (a probe the model answered without a call
is ``n/a`` for the wire checks that need one); it fails when the server broke what it sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evalhydra.probe.catalog import CITY, LOOKUP_SCHEMA
from evalhydra.probe.exchange import Exchange

__all__ = ["CHAT_CHECKS", "Check", "Verdict", "run_checks"]

PASS, FAIL, NA = "pass", "fail", "n/a"
#: Chat-template markup of a tool call, as servers leak it into the content when their parser fails.
_MARKUP = re.compile(r"<tool_call>|</tool_call>|<\|python_tag\|>|\[TOOL_CALLS\]|<function=|<\|tool_call|"
                     r"<tool_calls?>|\{\s*\"name\"\s*:\s*\"\w+\"\s*,\s*\"(arguments|parameters)\"")


@dataclass(frozen=True)
class Verdict:
    """One check's outcome: ``status`` pass, fail or n/a; ``detail`` says why; ``evidence`` is
    the raw field or chunk that shows it."""

    status: str
    detail: str
    evidence: Any = None


@dataclass(frozen=True)
class Check:
    """A check: its id, what it asks, and the function reading the exchanges."""

    id: str
    asks: str
    read: Callable[[Mapping[str, Exchange]], Verdict]


class _NotSent(LookupError):
    """A check read a probe that was not sent (the probe's deadline came first)."""


class _Sent(dict[str, Exchange]):
    """The exchanges by probe name; a name not among them raises :class:`_NotSent`."""

    def __missing__(self, name: str) -> Exchange:
        raise _NotSent(name)


def run_checks(checks: tuple[Check, ...], exchanges: Mapping[str, Exchange]) -> list[tuple[Check, Verdict]]:
    """Each check's verdict: n/a when its probes were not all sent, a failure when a reply is
    shaped past what the API allows (a field of another type) and the check cannot read it."""
    sent = _Sent(exchanges)
    found = []
    for check in checks:
        try:
            verdict = check.read(sent)
        except _NotSent as missing:
            verdict = Verdict(NA, f"probe {missing.args[0]!r} was not sent")
        except Exception as exc:  # the server's JSON, whatever its shape, must not end the probe
            verdict = Verdict(FAIL, f"a reply is not shaped as the API says ({type(exc).__name__}: {exc})")
        found.append((check, verdict))
    return found


def _answered(exchange: Exchange) -> Verdict | None:
    """n/a when the server refused the request (4xx), fail when it did not answer usably."""
    if exchange.ok:
        return None
    if exchange.refused:
        return Verdict(NA, f"the server refused the request ({exchange.status})", exchange.evidence())
    return Verdict(FAIL, f"no usable reply: {exchange.error}", exchange.evidence())


def _single(x: Mapping[str, Exchange]) -> Verdict:
    e = x["single"]
    return _answered(e) or (Verdict(PASS, "one get_weather call with the city", e.calls())
                            if e.calls() == [("get_weather", {"city": CITY})]
                            else Verdict(FAIL, "expected one get_weather call with the city", e.message()))


def _finish_reason(x: Mapping[str, Exchange]) -> Verdict:
    wrong = [(n, e.answer.finish_reason) for n in ("single", "parallel", "single_stream", "parallel_stream")
             if (e := x[n]).answer and e.answer.tool_calls and e.answer.finish_reason != "tool_calls"]
    if wrong:
        return Verdict(FAIL, "a reply with tool calls did not end with finish_reason tool_calls", wrong)
    return Verdict(PASS, "every reply with calls ended tool_calls") if _with_calls(x) else _no_calls()


def _with_calls(x: Mapping[str, Exchange]) -> bool:
    return any(x[n].calls() for n in ("single", "parallel", "single_stream", "parallel_stream"))


def _no_calls() -> Verdict:
    return Verdict(NA, "the model made no call to check")


def _no_markup(x: Mapping[str, Exchange]) -> Verdict:
    leaked = [(n, x[n].output()) for n in ("single", "parallel", "single_stream", "parallel_stream")
              if _MARKUP.search(x[n].output())]
    return Verdict(FAIL, "tool-call markup in the content: the server's parser missed the calls", leaked) \
        if leaked else Verdict(PASS, "no tool-call markup in any content")


def _ids_present(x: Mapping[str, Exchange]) -> Verdict:
    calls = [(n, c.id) for n in ("single", "parallel") for c in x[n].tool_calls()]
    if not calls:
        return _no_calls()
    missing = [n for n, i in calls if not i]
    return Verdict(FAIL, "a call without an id", calls) if missing else Verdict(PASS, "every call has an id")


def _parallel(x: Mapping[str, Exchange]) -> Verdict:
    e = x["parallel"]
    names = sorted(n for n, _ in e.calls())
    if names == ["get_time", "get_weather"]:
        return Verdict(PASS, "both calls in one message", e.calls())
    return _answered(e) or Verdict(FAIL, "expected get_weather and get_time in one message", e.message())


def _ids_unique(x: Mapping[str, Exchange]) -> Verdict:
    ids = [c.id for c in x["parallel"].tool_calls()]
    if len(ids) < 2:
        return Verdict(NA, "no parallel calls to compare")
    return Verdict(PASS, "distinct ids", ids) if len(set(ids)) == len(ids) and all(ids) \
        else Verdict(FAIL, "two calls of one message share an id", ids)


def _parallel_off(x: Mapping[str, Exchange]) -> Verdict:
    e = x["parallel_off"]
    return _answered(e) or (Verdict(PASS, "at most one call", e.calls()) if len(e.calls()) <= 1
                            else Verdict(FAIL, "parallel_tool_calls: false, yet several calls", e.calls()))


def _choice_none(x: Mapping[str, Exchange]) -> Verdict:
    e = x["choice_none"]
    return _answered(e) or (Verdict(PASS, "no call") if not e.calls()
                            else Verdict(FAIL, "tool_choice none, yet a call", e.calls()))


def _choice_required(x: Mapping[str, Exchange]) -> Verdict:
    e = x["choice_required"]
    return _answered(e) or (Verdict(PASS, "a call", e.calls()) if e.calls()
                            else Verdict(FAIL, "tool_choice required, yet no call", e.message()))


def _forced(name: str) -> Callable[[Mapping[str, Exchange]], Verdict]:
    def read(x: Mapping[str, Exchange]) -> Verdict:
        e = x[name]
        names = [n for n, _ in e.calls()]
        if names and set(names) == {"get_time"}:
            return Verdict(PASS, "get_time called", e.calls())
        return _answered(e) or Verdict(FAIL, "expected a call of get_time only", e.calls() or e.message())
    return read


def _no_arguments(name: str) -> Callable[[Mapping[str, Exchange]], Verdict]:
    def read(x: Mapping[str, Exchange]) -> Verdict:
        e = x[name]
        if (found := _answered(e)) is not None:
            return found
        raw = [c.arguments for c in e.tool_calls()]
        if not raw:
            return _no_calls()
        return Verdict(PASS, "arguments {}", raw) if all(r.strip() == "{}" for r in raw) \
            else Verdict(FAIL, 'a tool without parameters got arguments other than "{}"', raw)
    return read


def _strict(x: Mapping[str, Exchange]) -> Verdict:
    e = x["strict"]
    if (found := _answered(e)) is not None:
        return found
    if not e.calls():
        return _no_calls()
    import jsonschema  # here, not at the top: `evalhydra check` starts without it (bench/startup.py)

    schema = LOOKUP_SCHEMA
    for _, arguments in e.calls():
        try:
            jsonschema.validate(arguments, schema)
        except jsonschema.ValidationError as exc:
            return Verdict(FAIL, f"arguments break the strict schema: {exc.message}", arguments)
    return Verdict(PASS, "arguments match the strict schema", e.calls())


CHAT_CHECKS: tuple[Check, ...] = (
    Check("single_call", "one call, the right tool and arguments", _single),
    Check("finish_reason", "finish_reason tool_calls whenever a reply has calls", _finish_reason),
    Check("no_markup_in_content", "no chat-template markup of a call in the content", _no_markup),
    Check("call_ids_present", "every call has an id", _ids_present),
    Check("parallel_calls", "two calls in one message when asked", _parallel),
    Check("call_ids_unique", "the calls of one message have distinct ids", _ids_unique),
    Check("parallel_tool_calls_false", "parallel_tool_calls: false honoured", _parallel_off),
    Check("tool_choice_none", "tool_choice none: no call", _choice_none),
    Check("tool_choice_required", "tool_choice required: a call", _choice_required),
    Check("tool_choice_named", "a named tool_choice calls that tool", _forced("choice_named")),
    Check("allowed_tools", "allowed_tools: only the allowed tool", _forced("allowed_tools")),
    Check("no_argument_tool", 'a tool without parameters gets "{}"', _no_arguments("no_arguments")),
    Check("no_argument_tool_stream", 'the same, streamed', _no_arguments("no_arguments_stream")),
    Check("strict_schema", "a strict tool's arguments match its schema", _strict),
)
