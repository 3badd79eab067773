"""Response bodies of the mock server, as ready-to-send bytes.

Kept apart from the socket code so the shapes are easy to read and test.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

__all__ = [
    "OVERSIZED_MIN_BYTES",
    "chat_body",
    "completion",
    "embedding",
    "embeddings_body",
    "error_body",
    "models_body",
    "oversized_body",
    "sse_body",
]

#: An ``oversized`` fault's body is at least this large (8 MiB + 1 KiB).
OVERSIZED_MIN_BYTES = 8 * 1024 * 1024 + 1024

_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def completion(
    completion_id: str,
    created: int,
    model: str,
    message: dict[str, Any],
    usage: dict[str, Any] | None,
    finish: str | None = None,
) -> dict[str, Any]:
    """Return an OpenAI ``chat.completion`` object for one assistant message (``finish``: its
    ``finish_reason``, by default ``tool_calls`` for a call, else ``stop``)."""
    finish = finish or ("tool_calls" if message.get("tool_calls") else "stop")
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def chat_body(
    completion_id: str,
    created: int,
    model: str,
    message: dict[str, Any],
    usage: dict[str, Any] | None,
) -> bytes:
    """Return the JSON bytes of :func:`completion`."""
    return _DUMPS(completion(completion_id, created, model, message, usage)).encode()


def sse_body(
    completion_id: str,
    created: int,
    model: str,
    message: dict[str, Any],
    usage: dict[str, Any] | None,
) -> bytes:
    """Return a whole ``stream: true`` answer: two chunks, a usage chunk, ``[DONE]``."""
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": created}
    head["model"] = model
    delta = dict(message)
    if delta.get("tool_calls"):
        delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(delta["tool_calls"])]
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    chunks = [
        dict(head, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
        dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
        dict(head, choices=[], usage=usage),
    ]
    events = [f"data: {_DUMPS(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


def error_body(message: str, kind: str = "server_error") -> bytes:
    """Return an OpenAI-style error body."""
    return _DUMPS({"error": {"message": message, "type": kind}}).encode()


def embedding(text: str) -> list[float]:
    """The mock's embedding of ``text``: how often each letter a–z occurs in it (case folded), so
    the cosine of two texts can be worked out by hand; a text without letters is all zeros."""
    folded = text.lower()
    return [float(folded.count(letter)) for letter in "abcdefghijklmnopqrstuvwxyz"]


def embeddings_body(body: bytes) -> tuple[int, bytes]:
    """The status and body of a ``/v1/embeddings`` reply to the request ``body``."""
    try:
        request = json.loads(body)
        texts = request["input"]
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError("input")
    except (ValueError, KeyError, TypeError):
        return 400, error_body("input must be a string or a list of strings", "invalid_request_error")
    data = [{"object": "embedding", "index": i, "embedding": embedding(t)} for i, t in enumerate(texts)]
    tokens = sum(len(t.split()) for t in texts)
    return 200, json.dumps({"object": "list", "data": data, "model": request.get("model") or "mock-embedding",
                            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode()


def models_body(model: str) -> bytes:
    """Return the ``GET /v1/models`` list naming the mock model."""
    entry = {"id": model, "object": "model", "created": 0, "owned_by": "evalhydra-mock"}
    return _DUMPS({"object": "list", "data": [entry]}).encode()


@lru_cache(maxsize=4)
def oversized_body(model: str) -> bytes:
    """Return a valid completion whose content makes the body exceed 8 MiB."""
    message = {"role": "assistant", "content": "x" * OVERSIZED_MIN_BYTES}
    usage = {"prompt_tokens": 1, "completion_tokens": OVERSIZED_MIN_BYTES // 4}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return chat_body("chatcmpl-mock-oversized", 0, model, message, usage)
