"""A tiny chat-completions ASGI app for servers others wrote (hypercorn, uvicorn).

It answers ``POST …/chat/completions`` with the last user message echoed back.
The path picks how the body goes on the wire, so one app covers the framings
a client must read:

* ``/v1/chat/completions``: ``Content-Length``;
* ``/gzip/v1/chat/completions``: gzip-compressed (``Content-Encoding: gzip``);
* ``/chunked/v1/chat/completions``: streamed in three parts (chunked framing);
* ``/big/v1/chat/completions``: streamed without end, 1 MiB at a time.

A request with ``"stream": true`` is answered with server-sent events instead (the content in
deltas of three characters, a usage chunk when asked for, ``[DONE]``), each event its own
chunk; under ``/gzip/`` the event stream is gzip-compressed, flushed after each event.

Every connection's client port is counted in :data:`CONNECTIONS` (keep-alive checks).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

CONNECTIONS: set[tuple[str, int]] = set()


def events(content: str, usage: bool) -> list[bytes]:
    """A ``stream: true`` answer of ``content``: role chunk, deltas, finish, usage, ``[DONE]``."""
    head = {"id": "chatcmpl-asgi", "object": "chat.completion.chunk", "model": "asgi-model"}
    deltas = [{"role": "assistant", "content": ""}] + [{"content": content[i:i + 3]}
                                                       for i in range(0, len(content), 3)]
    chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage:
        chunks.append({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                                         "total_tokens": 4}})
    return [f"data: {json.dumps(c, ensure_ascii=False)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


async def _stream(send: Send, parts: list[bytes], compress: bool) -> None:
    headers = [(b"content-type", b"text/event-stream")]
    packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS) if compress else None
    if packer:
        headers.append((b"content-encoding", b"gzip"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for part in parts:
        data = packer.compress(part) + packer.flush(zlib.Z_SYNC_FLUSH) if packer else part
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": packer.flush() if packer else b""})


def completion(content: str) -> bytes:
    """A chat.completion body whose message is ``content``."""
    return json.dumps({
        "id": "chatcmpl-asgi", "object": "chat.completion", "model": "asgi-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }).encode()


async def _body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI entry point (HTTP only; lifespan events are acknowledged)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    CONNECTIONS.add(tuple(scope["client"]))
    request = json.loads(await _body(receive) or b"{}")
    content = request.get("messages", [{}])[-1].get("content", "")
    body = completion(str(content))
    path = scope["path"]
    if request.get("stream"):
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        await _stream(send, events(str(content), usage), path.startswith("/gzip/"))
    elif path.startswith("/gzip/"):
        await _reply(send, gzip.compress(body), [(b"content-encoding", b"gzip")])
    elif path.startswith("/chunked/"):
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        third = len(body) // 3
        for part in (body[:third], body[third:2 * third]):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": body[2 * third:]})
    elif path.startswith("/big/"):
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        for _ in range(64):
            await send({"type": "http.response.body", "body": b" " * (1 << 20), "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    else:
        await _reply(send, body, [])


async def _reply(send: Send, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
