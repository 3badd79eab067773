"""The streaming checks: how a server sends tool calls in ``chat.completion.chunk`` deltas.

Each reads the raw deltas of the streamed probes, and compares what evalhydra's stream assembler
made of them with the same request answered whole: a client that reads deltas by the rules
(calls keyed by ``index``, id and name on a call's first delta, arguments concatenated) gets the
calls the model made only when every check here passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from evalhydra.probe.catalog import CITY
from evalhydra.probe.checks import FAIL, NA, PASS, Check, Verdict
from evalhydra.probe.exchange import Exchange

__all__ = ["STREAM_CHECKS"]

_STREAMS = ("single_stream", "parallel_stream")


def _deltas(x: Mapping[str, Exchange]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each streamed probe's tool deltas (left out: a stream with none)."""
    return [(name, found) for name in _STREAMS if (found := x[name].tool_deltas())]


def _each_stream(x: Mapping[str, Exchange], fault: Callable[[list[dict[str, Any]]], tuple[str, Any] | None],
                 passed: str) -> Verdict:
    """A check over every streamed reply's call deltas: the first fault found fails it."""
    found = _deltas(x)
    if not found:
        return Verdict(NA, "no streamed call to check")
    for name, deltas in found:
        if (hit := fault(deltas)) is not None:
            return Verdict(FAIL, f"{name}: {hit[0]}", hit[1])
    return Verdict(PASS, passed)


def _unnamed_first(deltas: list[dict[str, Any]]) -> tuple[str, Any] | None:
    seen: set[Any] = set()
    indexed = any(isinstance(d.get("index"), int) for d in deltas)
    for delta in deltas:
        key = delta.get("index")
        if key in seen or (key is None and indexed):  # a bare later delta: stream_final_delta's
            continue
        seen.add(key)
        function = delta.get("function") or {}
        if not delta.get("id") or not function.get("name"):
            return "a call's first delta lacks its id or name", delta
    return None


def _unindexed(deltas: list[dict[str, Any]]) -> tuple[str, Any] | None:
    firsts = [d for d in deltas if d.get("id") or (d.get("function") or {}).get("name")]
    missing = [d for d in firsts if not isinstance(d.get("index"), int)]
    return ("a call's delta has no index", missing[0]) if missing else None


def _bare_last(deltas: list[dict[str, Any]]) -> tuple[str, Any] | None:
    bare = [d for d in deltas if "index" not in d and not d.get("id")]
    if bare and all(isinstance(d.get("index"), int) for d in deltas[:1]):
        return "a later delta dropped its index (a strict client loses it)", bare[-1]
    return None


def _first_delta(x: Mapping[str, Exchange]) -> Verdict:
    return _each_stream(x, _unnamed_first, "each call's first delta has its id and name")


def _index_present(x: Mapping[str, Exchange]) -> Verdict:
    return _each_stream(x, _unindexed, "every call's first delta has an index")


def _last_delta(x: Mapping[str, Exchange]) -> Verdict:
    return _each_stream(x, _bare_last, "every argument delta keeps its call's index")


def _index_distinct(x: Mapping[str, Exchange]) -> Verdict:
    deltas = x["parallel_stream"].tool_deltas()
    firsts = [d for d in deltas if d.get("id")]
    firsts = firsts or [d for d in deltas if (d.get("function") or {}).get("name")]
    if len(firsts) < 2:
        return Verdict(NA, "no parallel streamed calls")
    if not all(isinstance(d.get("index"), int) for d in firsts):
        return Verdict(NA, "the calls carry no index to compare (stream_index_present)")
    indexes = [d.get("index") for d in firsts]
    return Verdict(PASS, "each call its own index", indexes) if len(set(indexes)) == len(indexes) \
        else Verdict(FAIL, "two calls share an index: a client merges them into one", firsts)


def _renamed(deltas: list[dict[str, Any]]) -> tuple[str, Any] | None:
    named: set[Any] = set()
    for delta in deltas:
        if not (delta.get("function") or {}).get("name"):
            continue
        key = delta.get("index")
        if key in named and not delta.get("id"):  # an id starts a call; a name alone repeats one
            return "the name is sent again on a later delta (a client appending names doubles it)", delta
        named.add(key)
    return None


def _name_once(x: Mapping[str, Exchange]) -> Verdict:
    return _each_stream(x, _renamed, "each name sent once")


def _utf8(x: Mapping[str, Exchange]) -> Verdict:
    e = x["single_stream"]
    if not e.answer or not e.answer.tool_calls:
        return Verdict(NA, "no streamed call to check")
    arguments = e.answer.tool_calls[0].arguments
    broken = "\ufffd" in arguments or any(0xD800 <= ord(ch) <= 0xDFFF for ch in arguments)
    if broken:
        pieces = [(d.get("function") or {}).get("arguments") for d in e.tool_deltas()]
        return Verdict(FAIL, f"a character of {CITY!r} was broken in the stream", pieces)
    if CITY not in arguments:
        return Verdict(NA, f"the streamed arguments do not carry {CITY!r}", arguments)
    return Verdict(PASS, f"{CITY!r} reassembled whole")


def _usage(x: Mapping[str, Exchange]) -> Verdict:
    e = x["single_stream"]
    if not e.chunks:
        return Verdict(NA, "no stream") if e.refused else Verdict(FAIL, f"no stream: {e.error}", e.evidence())
    usage = [c["usage"] for c in e.chunks if isinstance(c, dict) and isinstance(c.get("usage"), dict)]
    return Verdict(PASS, "a usage chunk", usage[-1]) if usage \
        else Verdict(FAIL, "stream_options.include_usage asked, no usage chunk came", e.chunks[-2:])


def _equal(x: Mapping[str, Exchange]) -> Verdict:
    pairs = [("single", "single_stream"), ("parallel", "parallel_stream")]
    compared = [(w, s) for w, s in pairs if x[w].ok and x[s].ok]
    if not compared:
        return Verdict(NA, "no pair of answers to compare")
    for whole, streamed in compared:
        if sorted(map(repr, x[whole].calls())) != sorted(map(repr, x[streamed].calls())):
            return Verdict(FAIL, f"{streamed} gave other calls than {whole}",
                           {"whole": x[whole].calls(), "streamed": x[streamed].calls()})
    return Verdict(PASS, "the streamed calls equal the whole ones")


def _stream_ends(x: Mapping[str, Exchange]) -> Verdict:
    for name in _STREAMS:
        e = x[name]
        if not e.ok and not e.refused:  # cut short, or no stream at all (a whole reply instead)
            return Verdict(FAIL, f"{name}: the stream did not end as one answer: {e.error}",
                           e.chunks[-3:] or e.evidence())
    return Verdict(PASS, "every stream ended with a finish_reason and [DONE]")


STREAM_CHECKS: tuple[Check, ...] = (
    Check("stream_complete", "a stream ends with a finish_reason and [DONE]", _stream_ends),
    Check("stream_first_delta", "id and name on a call's first delta", _first_delta),
    Check("stream_index_present", "index on every call's deltas", _index_present),
    Check("stream_index_distinct", "no index reused for another call", _index_distinct),
    Check("stream_name_once", "a call's name not sent again in pieces", _name_once),
    Check("stream_final_delta", "nothing dropped from the final argument delta", _last_delta),
    Check("stream_utf8", "arguments split inside a UTF-8 character reassembled", _utf8),
    Check("stream_usage", "usage in the stream when asked", _usage),
    Check("stream_equals_whole", "streamed calls equal the whole answer's for the same seed", _equal),
)
