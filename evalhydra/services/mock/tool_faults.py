"""Serving-stack faults in tool calling, one switch each, for the conformance probe to find.

Unlike the wire shapes of :data:`~evalhydra.services.mock.streaming.TOOL_WIRES` (quirks a careful
client reads right), each of these loses or changes what the model meant, as servers have been
seen to do (issue 65). They are named in the ``tool_wire`` setting, comma-separated, alone or with
any other shape:

- ``marker_in_content``: the calls are not parsed out; their template markup is the content
  (``<tool_call>{…}</tool_call>``) and the reply ends ``stop``.
- ``stream_differs``: a stream's calls carry other arguments than the same request unstreamed
  (every string value upper-cased).
- ``utf8_split``: a stream splits the bytes of a character between two argument deltas, each
  half decoded alone into U+FFFD.
- ``parallel_ignored``: ``parallel_tool_calls: false`` is ignored (several calls in one message).
- ``required_ignored``: ``tool_choice: required`` is read as ``auto``.
- ``turn_ids``: call ids restart at ``call_0`` in every message, so a later turn's call reuses an
  earlier one's id.
- ``responses_unpaired``: the Responses API's ``function_call`` items have no ``call_id`` to pair
  their ``function_call_output`` with.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TOOL_FAULTS", "faulted", "heard", "split_character", "streamed_function", "unanswered_output",
           "unpaired"]

TOOL_FAULTS = ("marker_in_content", "stream_differs", "utf8_split", "parallel_ignored", "required_ignored",
               "turn_ids", "responses_unpaired")


def heard(payload: dict[str, Any], wires: frozenset[str]) -> dict[str, Any]:
    """The request as a server with ``parallel_ignored`` or ``required_ignored`` reads it."""
    if "parallel_ignored" in wires and "parallel_tool_calls" in payload:
        payload = {k: v for k, v in payload.items() if k != "parallel_tool_calls"}
    if "required_ignored" in wires and payload.get("tool_choice") == "required":
        payload = {**payload, "tool_choice": "auto"}
    return payload


def faulted(message: dict[str, Any], wires: frozenset[str]) -> dict[str, Any]:
    """A whole reply's message with ``turn_ids`` or ``marker_in_content`` applied."""
    calls = message.get("tool_calls") or []
    if "turn_ids" in wires:
        calls = [{**call, "id": f"call_{i}"} for i, call in enumerate(calls)]
        message = {**message, "tool_calls": calls}
    if "marker_in_content" in wires and calls:
        markup = "".join(_markup(call["function"]) for call in calls)
        message = {k: v for k, v in message.items() if k != "tool_calls"}
        message["content"] = markup
    return message


def _markup(function: dict[str, Any]) -> str:
    """A call as a Hermes-style chat template writes it."""
    name = json.dumps(function["name"])
    return f'<tool_call>{{"name": {name}, "arguments": {function["arguments"] or "{}"}}}</tool_call>'


def streamed_function(function: dict[str, Any], wires: frozenset[str]) -> dict[str, Any]:
    """A call's ``function`` as a stream with ``stream_differs`` sends it."""
    if "stream_differs" not in wires:
        return function
    try:
        arguments = json.loads(function["arguments"] or "{}")
    except ValueError:
        return function
    if isinstance(arguments, dict):
        arguments = {k: v.upper() if isinstance(v, str) else v for k, v in arguments.items()}
    return {**function, "arguments": json.dumps(arguments, ensure_ascii=False)}


def split_character(arguments: str) -> list[str]:
    """The arguments in two deltas split inside the UTF-8 bytes of their first non-ASCII character
    (``ü`` is added as a string value when there is none), each half decoded alone: U+FFFD."""
    if arguments.isascii():
        arguments = json.dumps({**json.loads(arguments), "place": "Zürich"}, ensure_ascii=False)
    at = next(i for i, ch in enumerate(arguments) if not ch.isascii())
    encoded = arguments[at].encode()
    head = encoded[:1].decode(errors="replace")
    tail = encoded[1:].decode(errors="replace")
    return [arguments[:at] + head, tail + arguments[at + 1:]]


def unpaired(answer: dict[str, Any], wires: frozenset[str]) -> dict[str, Any]:
    """A Responses API answer whose ``function_call`` items lost their ``call_id``
    (``responses_unpaired``)."""
    if "responses_unpaired" not in wires:
        return answer
    output = [{k: v for k, v in item.items() if k != "call_id"} if item.get("type") == "function_call"
              else item for item in answer.get("output") or []]
    return {**answer, "output": output}


def unanswered_output(request: dict[str, Any]) -> str | None:
    """The ``call_id`` of a Responses API request's ``function_call_output`` that pairs with no
    ``function_call`` before it (a compliant server refuses the request), or None."""
    items = request.get("input")
    if not isinstance(items, list):
        return None
    called: set[Any] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            called.add(item.get("call_id"))
        elif item.get("type") == "function_call_output" and (not item.get("call_id")
                                                             or item.get("call_id") not in called):
            return str(item.get("call_id"))
    return None
