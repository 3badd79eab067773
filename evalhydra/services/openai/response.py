"""The reply of an OpenAI-compatible endpoint: a completion parsed strictly, or the reason it is not one."""

from __future__ import annotations

import json
from typing import Any

from evalhydra.core import strictjson
from evalhydra.core.values import MAX_TOKEN_COUNT, ToolCall, Usage, immutable
from evalhydra.services.openai.reasoning import split_reasoning
from evalhydra.services.responses_api import chat_reply

__all__ = ["ChatAnswer", "InvalidResponseError", "parse_chat_data", "parse_chat_response",
           "parse_responses_reply", "parse_usage", "short_text",
           "whole_wire",
           "upstream_error_message"]


@immutable
class ChatAnswer:
    """A parsed successful completion."""

    output: str
    model: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    reasoning: str | None = None
    reasoning_finished: bool = True
    timing: Any = None  # a streamed answer's StreamTiming (None for a whole reply)
    finish_reason: str | None = None  # how the reply ended, as the service named it
    response_id: str | None = None  # the reply's ``id``
    wire: Any = None  # service.record_wire: the reply's content and tool calls as sent (raw deltas streamed)


class InvalidResponseError(Exception):
    """A 2xx body that is not a usable completion; ``args[0]`` is the seed reason.

    The reason is ``InvalidUpstreamJson`` or ``MalformedSuccessPayload``.
    """


def _count(value: Any, name: str) -> int:
    """A usage count: a non-negative int (anything else counts 0), at most :data:`MAX_TOKEN_COUNT`.

    Raises:
        InvalidResponseError: A count past :data:`MAX_TOKEN_COUNT`.
    """
    if type(value) is not int or value < 0:  # not a bool, not a float
        return 0
    if value > MAX_TOKEN_COUNT:
        shown = str(value) if value < 10**30 else f"a {len(str(value))}-digit number"
        raise InvalidResponseError(f"usage.{name} is {shown}, past any real count")
    return value


def parse_usage(data: dict[str, Any]) -> Usage:
    """The ``usage`` block of a completion or a stream's usage chunk (zeros where absent).

    Raises:
        InvalidResponseError: A count past :data:`MAX_TOKEN_COUNT`.
    """
    usage = data.get("usage")
    if type(usage) is not dict:
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if type(details) is dict else 0
    completion = usage.get("completion_tokens_details")
    thinking = completion.get("reasoning_tokens") if type(completion) is dict else 0
    return Usage(_count(usage.get("prompt_tokens"), "prompt_tokens"),
                 _count(usage.get("completion_tokens"), "completion_tokens"),
                 _count(cached, "prompt_tokens_details.cached_tokens"),
                 _count(thinking, "completion_tokens_details.reasoning_tokens"))


def _parse_tool_calls(message: dict[str, Any]) -> tuple[ToolCall, ...] | None:
    raw = message.get("tool_calls")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InvalidResponseError("MalformedSuccessPayload")
    calls = []
    for entry in raw:
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(function, dict):
            raise InvalidResponseError("MalformedSuccessPayload")
        name, arguments = function.get("name"), function.get("arguments")
        sent_as_object = isinstance(arguments, (dict, list))  # some servers send an object
        if sent_as_object:
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(name, str) or not (isinstance(arguments, str) or arguments is None):
            raise InvalidResponseError("MalformedSuccessPayload")
        call_id = entry.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        calls.append(ToolCall(name, arguments or "", call_id, sent_as_object))
    return tuple(calls)


def _first_message(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidResponseError("InvalidUpstreamJson")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise InvalidResponseError("MalformedSuccessPayload")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise InvalidResponseError("MalformedSuccessPayload")
    return message


def parse_chat_response(body: bytes, requested_model: str,
                        reasoning_tags: tuple[str, str] | None = None) -> ChatAnswer:
    """Parse a 2xx chat-completions body.

    Args:
        body: The raw body.
        requested_model: Used when the body names no model.
        reasoning_tags: When given, a reasoning model's thinking is taken out of the answer
            (:func:`~evalhydra.services.openai.reasoning.split_reasoning`).

    Returns:
        The answer: content (null → ""), model, tool calls, usage.

    Raises:
        InvalidResponseError: ``InvalidUpstreamJson`` (not a JSON object) or
            ``MalformedSuccessPayload`` (no ``choices[0].message``, bad
            content or tool calls, or neither content nor tool calls).
    """
    try:
        data = strictjson.loads(body)
    except (ValueError, UnicodeDecodeError):  # also a repeated key or a lone surrogate, as zig_eval
        raise InvalidResponseError("InvalidUpstreamJson") from None
    return parse_chat_data(data, requested_model, reasoning_tags)


def parse_responses_reply(body: bytes, requested_model: str,
                          reasoning_tags: tuple[str, str] | None = None) -> ChatAnswer:
    """Parse a 2xx Responses API body (:mod:`~evalhydra.services.responses_api`) as the chat
    parser reads a completion.

    Raises:
        InvalidResponseError: As :func:`parse_chat_response`; a ``failed`` response with its error.
    """
    try:
        data = chat_reply(strictjson.loads(body))
    except (ValueError, UnicodeDecodeError):
        raise InvalidResponseError("InvalidUpstreamJson") from None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        raise InvalidResponseError(f"ResponseFailed: {error.get('code') or 'error'}: {error['message']}")
    return parse_chat_data(data, requested_model, reasoning_tags)


def parse_chat_data(data: Any, requested_model: str,
                    reasoning_tags: tuple[str, str] | None = None) -> ChatAnswer:
    """:func:`parse_chat_response` of a body already parsed."""
    message = _first_message(data)
    tool_calls = _parse_tool_calls(message)
    if "content" in message:
        content = message["content"]
        if content is None:
            content = ""
        elif not isinstance(content, str):
            raise InvalidResponseError("MalformedSuccessPayload")
    elif tool_calls is not None:
        content = ""
    else:
        raise InvalidResponseError("MalformedSuccessPayload")
    model = data.get("model")
    model = model if isinstance(model, str) and model else requested_model
    finish, reply_id = short_text(data["choices"][0].get("finish_reason")), short_text(data.get("id"))
    if reasoning_tags is None:
        return ChatAnswer(content, model, tool_calls or (), parse_usage(data), finish_reason=finish,
                          response_id=reply_id)
    split = split_reasoning(message, content, reasoning_tags)
    return ChatAnswer(split.answer, model, tool_calls or (), parse_usage(data), split.reasoning,
                      split.finished, finish_reason=finish, response_id=reply_id)


def whole_wire(body: bytes) -> dict[str, Any]:
    """A whole reply's content and ``tool_calls`` as sent (``service.record_wire``)."""
    try:
        message = _first_message(chat_reply(strictjson.loads(body)))
    except (ValueError, UnicodeDecodeError, InvalidResponseError):
        return {}
    return {"content": message.get("content"), "tool_calls": message.get("tool_calls")}


def short_text(value: Any) -> str | None:
    """A reply's identifier or finish reason as stored: a non-empty string cut to 200 characters,
    else None (a hostile server's megabyte id is not kept whole)."""
    return value[:200] if isinstance(value, str) and value else None


def upstream_error_message(body: bytes) -> str:
    """The reason for a final non-2xx response (zig_eval rule).

    Args:
        body: The error response's body.

    Returns:
        The body's ``error.message``, or ``error`` when it is a string, else
        ``UpstreamHttpError``.
    """
    try:
        data = strictjson.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "UpstreamHttpError"
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return "UpstreamHttpError"
