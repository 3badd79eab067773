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

from evalhydra.services.mock.replies import message_text

__all__ = ["REASONING_SHAPES", "STREAM_FAULTS", "stream_events", "with_reasoning"]

#: Where a reasoning reply's thinking goes: ``message.reasoning_content`` (vLLM, SGLang),
#: ``message.reasoning`` (llama.cpp) or a ``<think>`` block leading the content.
REASONING_SHAPES = ("reasoning_content", "reasoning", "inline")
#: Faults of a streamed reply: ``stream_cut`` (half the events, then the connection closes),
#: ``stream_error`` (an error event half-way), ``stream_early_done`` (``[DONE]`` before any
#: ``finish_reason``, as llama-cpp-python's server ends a stream when another request waits).
STREAM_FAULTS = ("stream_cut", "stream_error", "stream_early_done")

_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


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


def _deltas(message: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """The message as deltas of at most ``size`` characters each."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    for key in ("reasoning_content", "reasoning"):
        deltas += [{key: piece} for piece in _pieces(message.get(key) or "", size)]
    deltas += [{"content": piece} for piece in _pieces(message.get("content") or "", size)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        deltas.append({"tool_calls": [{"index": index, "id": call.get("id"), "type": "function",
                                       "function": {"name": function["name"], "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                   for piece in _pieces(function["arguments"], size)]
    return deltas


def stream_events(head: dict[str, Any], message: dict[str, Any], usage: dict[str, Any] | None, *,
                  delta_chars: int, fault: str | None = None) -> list[bytes]:
    """The events of a streamed answer, each ready to send.

    Args:
        head: The chunks' ``id``, ``object``, ``created`` and ``model``.
        message: The whole answer.
        usage: The usage chunk's block, or None to send none.
        delta_chars: Most characters per delta.
        fault: One of :data:`STREAM_FAULTS`, or None.

    Returns:
        The events (``data: …`` and a blank line each).
    """
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    chunks = [dict(head, choices=[{"index": 0, "delta": d, "finish_reason": None}])
              for d in _deltas(message, delta_chars)]
    half = len(chunks) // 2
    if fault == "stream_error":
        chunks = chunks[:half] + [{"error": {"message": "mock stream error", "type": "server_error"}}]
    elif fault == "stream_cut":
        chunks = chunks[:half]
    elif fault != "stream_early_done":
        chunks.append(dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
        if usage is not None:
            chunks.append(dict(head, choices=[], usage=usage))
    events = [b"data: " + _DUMPS(chunk).encode() + b"\n\n" for chunk in chunks]
    return events if fault == "stream_cut" else [*events, b"data: [DONE]\n\n"]
