"""OpenAI's Responses API (``POST /v1/responses``) as a translation of Chat Completions.

A service with ``api: responses`` builds its request as a chat body
(:func:`~evalhydra.services.openai.payload.build_payload`: messages, params, tools)
and sends it translated by :func:`responses_request`: system messages become
``instructions``, the others ``input`` items (text and image parts), a tool
exchange ``function_call`` and ``function_call_output`` items; ``max_tokens`` /
``max_completion_tokens`` become ``max_output_tokens``, ``response_format``
``text.format``, ``reasoning_effort`` ``reasoning.effort``, and function tools
lose their ``function`` wrapper. The reply is read back by :func:`chat_reply` into
the chat-completion shape the chat parser reads: ``message`` items' ``output_text``
are the content, ``reasoning`` items' summaries the thinking, ``function_call``
items the tool calls, and ``usage`` (input, output, cached and reasoning tokens)
is renamed; a reply ``incomplete`` for ``max_output_tokens`` is a ``length``
stop, one whose status is ``failed`` an invalid response with its error.

The mock (:mod:`evalhydra.services.mock`) serves the API with the inverse
translations, :func:`chat_request` and :func:`responses_reply`.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["chat_reply", "chat_request", "chat_usage", "responses_events", "responses_reply",
           "responses_request"]


# -- a chat body as a Responses request ------------------------------------------------------------


def responses_request(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions body as the Responses API's request body."""
    body = {key: value for key, value in chat.items() if key not in _CHAT_ONLY}
    instructions = [
        m["content"]
        for m in chat.get("messages", [])
        if m.get("role") == "system" and isinstance(m.get("content"), str)
    ]
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    body["input"] = [
        item for m in chat.get("messages", []) if m.get("role") != "system" for item in _input_items(m)
    ]
    tokens = chat.get("max_completion_tokens", chat.get("max_tokens"))
    if tokens is not None:
        body["max_output_tokens"] = tokens
    if chat.get("response_format"):
        body["text"] = {"format": _text_format(chat["response_format"])}
    if chat.get("reasoning_effort"):
        body["reasoning"] = {"effort": chat["reasoning_effort"]}
    if chat.get("tools"):
        body["tools"] = [_tool(tool) for tool in chat["tools"]]
    return body


#: Chat keys the Responses API spells otherwise (translated above) or does not take.
_CHAT_ONLY = frozenset(
    {
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "response_format",
        "reasoning_effort",
        "tools",
        "stream_options",
        "n",
        "logprobs",
    }
)


def _input_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.get("tool_call_id", ""),
                "output": _as_text(message.get("content")),
            }
        ]
    items: list[dict[str, Any]] = []
    content = message.get("content")
    if content not in (None, ""):
        items.append({"role": role, "content": _parts(content, assistant=role == "assistant")})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id", ""),
                "name": function.get("name", ""),
                "arguments": function.get("arguments", ""),
            }
        )
    return items


def _parts(content: Any, *, assistant: bool) -> Any:
    if isinstance(content, str):
        return content
    text_type = "output_text" if assistant else "input_text"
    parts = []
    for part in content:
        if part.get("type") == "image_url":
            parts.append({"type": "input_image", "image_url": part.get("image_url", {}).get("url", "")})
        else:
            parts.append({"type": text_type, "text": part.get("text", "")})
    return parts


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _text_format(response_format: dict[str, Any]) -> dict[str, Any]:
    if response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema") or {}
        return {"type": "json_schema", **{k: v for k, v in schema.items() if v is not None}}
    return dict(response_format)


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, dict):
        return dict(tool)
    return {"type": "function", **function}


# -- a Responses reply read as a chat completion ---------------------------------------------------


#: The statuses of a finished answer (``incomplete``: stopped at ``max_output_tokens``).
_FINISHED = ("completed", "incomplete")


def chat_reply(reply: Any) -> Any:
    """A Responses API object as a chat completion (anything else is returned as it is, for the chat
    parser to refuse). A response that is no finished answer (``failed``, ``in_progress``,
    ``queued``, ``cancelled``; no ``output`` list) or holds values of the wrong JSON types is
    ``{"error": {...}, "choices": []}``: an invalid response naming why, never a model's answer."""
    if not isinstance(reply, dict) or reply.get("object") != "response":
        return reply
    status = reply.get("status")
    if status == "failed":
        error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
        return {"error": error or {"code": "failed", "message": "the response failed"}, "choices": []}
    if status is not None and status not in _FINISHED:
        return _not_an_answer("unfinished", f"the response is {str(status)[:40]!r}, not a finished answer")
    if not isinstance(reply.get("output"), list):
        return _not_an_answer("malformed", "the response's output is not a list of items")
    try:
        return _as_chat(reply)
    except (TypeError, AttributeError, ValueError) as exc:
        return _not_an_answer("malformed", f"a value of the response has the wrong type ({exc})")


def _not_an_answer(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}, "choices": []}


def _as_chat(reply: dict[str, Any]) -> dict[str, Any]:
    texts, thinking, calls = [], [], []
    for item in reply.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts += [
                part.get("text", "")
                for part in item.get("content") or []
                if isinstance(part, dict) and part.get("type") == "output_text"
            ]
        elif item.get("type") == "reasoning":
            thinking += [part.get("text", "") for part in item.get("summary") or [] if isinstance(part, dict)]
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id", ""),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if thinking:
        message["reasoning_content"] = "\n".join(thinking)
    if calls:
        message["tool_calls"] = calls
    found = reply.get("incomplete_details")
    details: dict[str, Any] = found if isinstance(found, dict) else {}
    finish = "length" if details.get("reason") == "max_output_tokens" else "tool_calls" if calls else "stop"
    chat = {
        "id": reply.get("id"),
        "object": "chat.completion",
        "model": reply.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if isinstance(reply.get("usage"), dict):
        chat["usage"] = chat_usage(reply["usage"])
    return chat


def chat_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """A Responses ``usage`` (input, output, cached and reasoning tokens) in chat's names."""
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens", 0)
    thinking = (usage.get("output_tokens_details") or {}).get("reasoning_tokens", 0)
    return {
        "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens"),
        "total_tokens": usage.get("total_tokens"),
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": thinking},
    }


# -- the mock's side: the inverse translations -------------------------------------------------------


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses request as the chat body the mock's chat logic answers."""
    chat = {
        key: value
        for key, value in body.items()
        if key not in ("input", "instructions", "max_output_tokens", "text", "reasoning", "tools", "stream")
    }
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    given = body.get("input")
    for item in [{"role": "user", "content": given}] if isinstance(given, str) else given or []:
        if isinstance(item, dict) and "role" in item:
            content = item.get("content")
            text = (
                content
                if isinstance(content, str)
                else "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))
            )
            messages.append({"role": item["role"], "content": text})
        elif isinstance(item, dict) and item.get("type") == "function_call_output":
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")}
            )
    chat["messages"] = messages
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    text_format = (body.get("text") or {}).get("format")
    if isinstance(text_format, dict):
        chat["response_format"] = (
            {"type": "json_schema", "json_schema": {k: v for k, v in text_format.items() if k != "type"}}
            if text_format.get("type") == "json_schema"
            else text_format
        )
    if body.get("tools"):
        chat["tools"] = [
            {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}
            for tool in body["tools"]
            if isinstance(tool, dict)
        ]
    return chat


def responses_reply(chat: dict[str, Any], response_id: str, created: int) -> dict[str, Any]:
    """A chat completion as the Responses API's object."""
    choice = (chat.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    thinking = message.get("reasoning_content") or message.get("reasoning")
    if thinking:
        output.append(
            {
                "type": "reasoning",
                "id": f"rs_{response_id}",
                "status": "completed",
                "summary": [{"type": "summary_text", "text": thinking}],
            }
        )
    if message.get("content") is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_{response_id}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": message["content"], "annotations": []}],
            }
        )
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{response_id}_{index}",
                "status": "completed",
                "call_id": call.get("id", f"call_{index}"),
                "name": function.get("name", ""),
                "arguments": function.get("arguments", ""),
            }
        )
    usage = chat.get("usage") or {}
    length = choice.get("finish_reason") == "length"
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "model": chat.get("model"),
        "status": "incomplete" if length else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if length else None,
        "error": None,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage.get("prompt_tokens", 0),
            "input_tokens_details": {"cached_tokens": (usage.get("prompt_tokens_details") or {}).get(
                "cached_tokens", 0)},
            "output_tokens": usage.get("completion_tokens", 0),
            "output_tokens_details": {"reasoning_tokens": (usage.get("completion_tokens_details") or {}).get(
                "reasoning_tokens", 0)},
            "total_tokens": usage.get("total_tokens", 0),
        },
    }


def responses_events(reply: dict[str, Any]) -> bytes:
    """A whole Responses object as the API streams it: typed server-sent events, the text in deltas."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {**reply, "status": "in_progress", "output": []}})
    ]
    for index, item in enumerate(reply["output"]):
        events.append(("response.output_item.added", {"output_index": index, "item": item}))
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for start in range(0, len(text), 8) or [0]:
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "output_index": index,
                            "content_index": 0,
                            "item_id": item["id"],
                            "delta": text[start : start + 8],
                        },
                    )
                )
            events.append(
                (
                    "response.output_text.done",
                    {"output_index": index, "content_index": 0, "item_id": item["id"], "text": text},
                )
            )
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    events.append(("response.completed", {"response": reply}))
    return "".join(
        f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': n, **data})}\n\n"
        for n, (name, data) in enumerate(events)
    ).encode()
