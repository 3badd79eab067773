"""One probe request and what came back, kept raw for evidence and read by the reference reader.

A whole reply keeps its JSON body; a stream keeps every event's JSON in order. Either is also
read by evalhydra's own reader (:mod:`evalhydra.services.openai`: the parser of a whole reply,
the stream assembler of a stream), the reference a check compares the raw wire against.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio
from httpx_sse import EventSource

from evalhydra.core.values import ToolCall, arguments_or_empty
from evalhydra.http.body import read_capped
from evalhydra.services.openai.response import ChatAnswer, InvalidResponseError, parse_chat_data
from evalhydra.services.openai.stream import StreamAssembler
from evalhydra.services.responses_api import chat_reply

__all__ = ["Exchange", "parsed_arguments", "send"]

#: Most bytes of a reply read (a probe's replies are a few hundred bytes; a server gone wrong is cut).
_BODY_CAP = 256 * 1024
_CUT = f"over {_BODY_CAP} bytes (cut: no probe's answer is that long)"


@dataclass
class Exchange:
    """A probe request and its reply.

    Attributes:
        name: The probe's name.
        request: The body sent.
        status: The HTTP status (None: no reply).
        body: A whole reply's JSON (None for a stream or an unreadable body).
        chunks: A stream's events, each its JSON (``"[DONE]"`` as the string).
        error: Why there is no usable reply: a transport error, a body that is not JSON, the
            reference reader's refusal.
        answer: The reply as evalhydra's reader assembles it.
    """

    name: str
    request: dict[str, Any]
    status: int | None = None
    body: Any = None
    chunks: list[Any] = field(default_factory=list)
    error: str | None = None
    answer: ChatAnswer | None = None

    @property
    def ok(self) -> bool:
        """The server answered 2xx and the reference reader read the reply."""
        return self.answer is not None

    @property
    def refused(self) -> bool:
        """The server answered 4xx: it does not take the request (a feature it lacks)."""
        return self.status is not None and 400 <= self.status < 500

    def message(self) -> dict[str, Any]:
        """A whole reply's ``choices[0].message`` ({} when there is none)."""
        try:
            found = self.body["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            return {}
        return found if isinstance(found, dict) else {}

    def output(self) -> str:
        """The reply's text as the reference reader has it ("" without one)."""
        return self.answer.output if self.answer else ""

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The reply's tool calls as the reference reader has them."""
        return self.answer.tool_calls if self.answer else ()

    def calls(self) -> list[tuple[str, Any]]:
        """The reply's tool calls as the reference reader has them: (name, parsed arguments)."""
        return [(c.name, parsed_arguments(c)) for c in self.answer.tool_calls] if self.answer else []

    def tool_deltas(self) -> list[dict[str, Any]]:
        """A stream's ``tool_calls`` deltas, in order."""
        found = []
        for chunk in self.chunks:
            for choice in chunk.get("choices") or [] if isinstance(chunk, dict) else []:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if isinstance(delta, dict) and isinstance(delta.get("tool_calls"), list):
                    found += [d for d in delta["tool_calls"] if isinstance(d, dict)]
        return found

    def evidence(self) -> Any:
        """What the server sent: the whole body, or the stream's events."""
        if self.error and self.answer is None and self.body is None and not self.chunks:
            return {"status": self.status, "error": self.error}
        return self.body if not self.chunks else self.chunks


def parsed_arguments(call: ToolCall) -> Any:
    """A call's arguments as JSON, or the raw text when they are not JSON."""
    try:
        return json.loads(arguments_or_empty(call.arguments))
    except ValueError:
        return call.arguments


async def send(client: httpx.AsyncClient, url: str, name: str, body: dict[str, Any],
               model: str) -> Exchange:
    """Send one probe and read its reply, whole or streamed; never raises for what the server does."""
    exchange = Exchange(name, body)
    try:
        if body.get("stream"):
            await _streamed(client, url, body, model, exchange)
        else:
            await _whole(client, url, body, model, exchange)
    except (httpx.HTTPError, trio.TooSlowError) as exc:
        exchange.error = f"{type(exc).__name__}: {exc}"
    return exchange


async def _whole(client: httpx.AsyncClient, url: str, body: dict[str, Any], model: str,
                 exchange: Exchange) -> None:
    async with client.stream("POST", url, json=body) as response:
        exchange.status = response.status_code
        content = await read_capped(response, _BODY_CAP)
    if content is None:
        exchange.error = f"a reply {_CUT}"
        return
    try:
        exchange.body = json.loads(content)
    except ValueError:
        exchange.error = f"not JSON: {content[:200]!r}"
        return
    if response.status_code // 100 != 2:
        exchange.error = f"HTTP {response.status_code}"
        return
    try:
        exchange.answer = parse_chat_data(chat_reply(exchange.body), model)
    except InvalidResponseError as exc:
        exchange.error = str(exc.args[0])


async def _streamed(client: httpx.AsyncClient, url: str, body: dict[str, Any], model: str,
                    exchange: Exchange) -> None:
    async with client.stream("POST", url, json=body) as response:
        exchange.status = response.status_code
        if response.status_code // 100 != 2:
            content = await read_capped(response, _BODY_CAP) or b""
            exchange.error = f"HTTP {response.status_code}: {content[:200].decode('utf-8', 'replace')}"
            return
        assembler = StreamAssembler(model, None, trio.current_time(), trio.current_time)
        size = 0
        try:
            async with aclosing(EventSource(response).aiter_sse()) as events:
                async for event in events:
                    size += len(event.data)
                    if size > _BODY_CAP:
                        exchange.error = f"a stream {_CUT}"
                        return
                    exchange.chunks.append(_event_json(event.data))
                    assembler.feed(event.event, event.data)
            exchange.answer = assembler.answer()
        except InvalidResponseError as exc:
            exchange.error = str(exc.args[0])


def _event_json(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data
