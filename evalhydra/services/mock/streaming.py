"""The mock's reasoning replies and server-sent event streams.

A reasoning reply carries a short, deterministic thought in one of the three shapes servers
use (:data:`REASONING_SHAPES`). A streamed reply is the answer as ``chat.completion.chunk``
events: a role-only chunk, the thinking and content in small deltas, tool calls whose
arguments arrive in pieces, a ``finish_reason`` chunk, the usage chunk when the request asked
for it, and ``[DONE]``. The stream faults cut it, send an error event, or end it with
``[DONE]`` before any ``finish_reason``.
"""

from __future__ import annotations

import json
from typing import Any

from evalhydra.services.mock.text import message_text
from evalhydra.services.mock.tool_faults import faulted, split_character, streamed_function

__all__ = ["REASONING_SHAPES", "STREAM_FAULTS", "TOOL_WIRES", "finish_reason", "stream_events", "tool_wired",
           "wire_set", "with_reasoning"]

#: Where a reasoning reply's thinking goes: ``message.reasoning_content`` (vLLM, SGLang),
#: ``message.reasoning`` (llama.cpp) or a ``<think>`` block leading the content.
REASONING_SHAPES = ("reasoning_content", "reasoning", "inline")
#: Faults of a streamed reply: ``stream_cut`` (half the events, then the connection closes),
#: ``stream_error`` (an error event half-way), ``stream_early_done`` (``[DONE]`` before any
#: ``finish_reason``, as llama-cpp-python's server ends a stream when another request waits).
STREAM_FAULTS = ("stream_cut", "stream_error", "stream_early_done")

#: How tool calls go on the wire, each as some real server sends them. In every reply:
#: ``no_ids`` (calls without ``id``), ``same_ids`` (every call ``call_0``), ``empty_arguments``
#: (``arguments: ""``), ``content_and_calls`` (text beside the calls), ``stop_finish``
#: (``finish_reason: stop`` with calls). In streams only: ``no_index`` (deltas without ``index``),
#: ``reused_index`` (``index: 0`` for every call), ``names_repeated`` (the name on every delta),
#: ``last_bare`` (a last argument delta with neither id nor name nor index), ``split_surrogate``
#: (a character beyond the BMP split between two argument deltas, its surrogate halves apart).
TOOL_WIRES = ("no_ids", "same_ids", "empty_arguments", "content_and_calls", "stop_finish", "no_index",
              "reused_index", "names_repeated", "last_bare", "split_surrogate")


def wire_set(value: str | None) -> frozenset[str]:
    """The wire shapes and faults a ``tool_wire`` setting names (comma-separated, so they combine)."""
    return frozenset(part.strip() for part in (value or "").split(",") if part.strip())


_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_DUMPS_ASCII = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode


def tool_wired(message: dict[str, Any], wires: frozenset[str]) -> dict[str, Any]:
    """``message`` with its tool calls as ``wires`` (of :data:`TOOL_WIRES` and
    :data:`~evalhydra.services.mock.tool_faults.TOOL_FAULTS`) have them."""
    calls = message.get("tool_calls")
    if not calls or not wires:
        return message
    message = faulted(message, wires)
    if "content_and_calls" in wires:
        message = {**message, "content": "Let me look that up."}
    if not wires & {"no_ids", "same_ids", "empty_arguments"} or not message.get("tool_calls"):
        return message
    changed = []
    for call in message["tool_calls"]:
        call = {**call, "function": dict(call["function"])}
        if "no_ids" in wires:
            call.pop("id", None)
        elif "same_ids" in wires:
            call["id"] = "call_0"
        if "empty_arguments" in wires:
            call["function"]["arguments"] = ""
        changed.append(call)
    return {**message, "tool_calls": changed}


def finish_reason(message: dict[str, Any], wires: frozenset[str]) -> str:
    """The ``finish_reason`` a reply ends with."""
    return "tool_calls" if message.get("tool_calls") and "stop_finish" not in wires else "stop"


def thought_for(payload: dict[str, Any]) -> str:
    """The mock's thinking about a request: deterministic, from its last message."""
    messages = payload.get("messages") or [{}]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    return f"The user asks: {message_text(last.get('content'))[:80]}. I answer as the rules say."


def with_reasoning(message: dict[str, Any], payload: dict[str, Any], shape: str) -> dict[str, Any]:
    """``message`` with a thought in ``shape`` (one of :data:`REASONING_SHAPES`)."""
    thought = thought_for(payload)
    if shape == "inline":
        return {**message, "content": f"<think>\n{thought}\n</think>\n\n{message.get('content') or ''}"}
    return {**message, shape: thought}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), max(1, size))]


def _deltas(message: dict[str, Any], size: int, wires: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The message as deltas of at most ``size`` characters each (tool calls as ``wire`` sends them)."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    for key in ("reasoning_content", "reasoning"):
        deltas += [{key: piece} for piece in _pieces(message.get(key) or "", size)]
    deltas += [{"content": piece} for piece in _pieces(message.get("content") or "", size)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        deltas += _call_deltas(index, call, size, wires)
    return deltas


def _call_deltas(index: int, call: dict[str, Any], size: int, wires: frozenset[str]) -> list[dict[str, Any]]:
    """One call's deltas: the first with its id and name, then its arguments in pieces."""
    function = streamed_function(call["function"], wires)
    position = {} if "no_index" in wires else {"index": 0 if "reused_index" in wires else index}
    first: dict[str, Any] = {**position, "type": "function",
                             "function": {"name": function["name"], "arguments": ""}}
    if call.get("id") is not None:
        first["id"] = call["id"]
    pieces = _pieces(function["arguments"], size)
    if "split_surrogate" in wires:
        pieces = _split_pair(function["arguments"] or "{}")
    elif "utf8_split" in wires:
        pieces = split_character(function["arguments"] or "{}")
    named = {"name": function["name"]} if "names_repeated" in wires else {}
    rest: list[dict[str, Any]] = [{**position, "function": {**named, "arguments": piece}} for piece in pieces]
    if "last_bare" in wires and rest:
        rest[-1] = {"function": {"arguments": pieces[-1]}}
    return [{"tool_calls": [delta]} for delta in [first, *rest]]


def _split_pair(arguments: str) -> list[str]:
    """The arguments in two pieces, split between the surrogate halves of a character beyond the
    BMP (one is added as a string value when there is none)."""
    if not any(ord(ch) > 0xFFFF for ch in arguments):
        arguments = json.dumps({**json.loads(arguments), "mood": "\U0001F600"}, ensure_ascii=False)
    at = next(i for i, ch in enumerate(arguments) if ord(ch) > 0xFFFF)
    code = ord(arguments[at]) - 0x10000
    high, low = chr(0xD800 + (code >> 10)), chr(0xDC00 + (code & 0x3FF))
    return [arguments[:at] + high, low + arguments[at + 1:]]


def stream_events(head: dict[str, Any], message: dict[str, Any], usage: dict[str, Any] | None, *,
                  delta_chars: int, fault: str | None = None,
                  wires: frozenset[str] = frozenset()) -> list[bytes]:
    """The events of a streamed answer, each ready to send.

    Args:
        head: The chunks' ``id``, ``object``, ``created`` and ``model``.
        message: The whole answer.
        usage: The usage chunk's block, or None to send none.
        delta_chars: Most characters per delta.
        fault: One of :data:`STREAM_FAULTS`, or None.
        wires: How tool calls are sent (:func:`wire_set`).

    Returns:
        The events (``data: …`` and a blank line each).
    """
    message = tool_wired(message, wires)
    finish = finish_reason(message, wires)
    chunks = [dict(head, choices=[{"index": 0, "delta": d, "finish_reason": None}])
              for d in _deltas(message, delta_chars, wires)]
    half = len(chunks) // 2
    if fault == "stream_error":
        chunks = chunks[:half] + [{"error": {"message": "mock stream error", "type": "server_error"}}]
    elif fault == "stream_cut":
        chunks = chunks[:half]
    elif fault != "stream_early_done":
        chunks.append(dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
        if usage is not None:
            chunks.append(dict(head, choices=[], usage=usage))
    dumps = _DUMPS_ASCII if "split_surrogate" in wires else _DUMPS  # a lone half only as an escape
    events = [b"data: " + dumps(chunk).encode() + b"\n\n" for chunk in chunks]
    return events if fault == "stream_cut" else [*events, b"data: [DONE]\n\n"]
