"""A streamed chat completion (``stream: true``): server-sent events assembled into one answer.

The reply's body is read as it arrives (:func:`~evalhydra.http.body.aiter_capped`, with the
cap of a whole reply), checked as strict UTF-8, and split into events by ``httpx-sse``. Each
``data:`` event is a ``chat.completion.chunk``; :class:`StreamAssembler` joins their deltas:
content, reasoning (``reasoning_content`` or ``reasoning``), and tool calls whose arguments
arrive in pieces under one ``index``. The usage chunk (``stream_options.include_usage``) gives
the tokens; without one they stay unknown.

A stream is only an answer once it ended properly: ``data: [DONE]`` after a chunk with a
``finish_reason``. An error event, a stream cut before ``[DONE]`` and a ``[DONE]`` with no
``finish_reason`` yet (llama-cpp-python's server ends a stream that way when another request
waits) are :class:`~evalhydra.services.openai.response.InvalidResponseError`: an infrastructure
error, re-sent like any other, never a cut answer scored as wrong.

Timing is read from the run's clock as events arrive: the first content or reasoning delta
(time to first token, not the role-only chunk), the first answer token after the thinking,
and the last delta (for output tokens per second).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import httpx
import trio
from httpx_sse import EventSource

from evalhydra.core import strictjson
from evalhydra.core.values import Usage
from evalhydra.http.body import BodyTooLarge, aiter_capped
from evalhydra.services.openai.reasoning import split_reasoning
from evalhydra.services.openai.response import ChatAnswer, InvalidResponseError, parse_usage, short_text
from evalhydra.services.openai.tool_deltas import ToolCallAssembly
from evalhydra.services.responses_api import chat_reply

__all__ = ["AFTER_DONE_S", "StreamAssembler", "StreamTiming", "is_event_stream", "read_stream"]

_DONE = "[DONE]"
#: Seconds the rest of a body is read after ``[DONE]`` (its end frees the connection for reuse).
AFTER_DONE_S = 1.0
_SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8"}


@dataclass(frozen=True, slots=True)
class StreamTiming:
    """When a streamed answer arrived, in milliseconds from the request's start.

    Attributes:
        ttft_ms: The first content or reasoning delta.
        first_answer_ms: The first delta of the answer itself (after any thinking).
        output_tps: Completion tokens per second from the first delta to the last
            (None without usage or with a single delta).
    """

    ttft_ms: float | None = None
    first_answer_ms: float | None = None
    output_tps: float | None = None


def is_event_stream(response: httpx.Response) -> bool:
    """True when a reply is server-sent events (a server that ignores ``stream: true``
    answers with one JSON completion instead)."""
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    return kind != "application/json" and not kind.endswith("+json")


class StreamAssembler:
    """Joins a stream's ``chat.completion.chunk`` events into one :class:`ChatAnswer`.

    Args:
        requested_model: Used when no chunk names a model.
        reasoning_tags: The inline thinking block's tags, or None to keep the content whole.
        started: The run-clock time the request was sent.
        now: The run's clock.
    """

    def __init__(self, requested_model: str, reasoning_tags: tuple[str, str] | None, started: float,
                 now: Callable[[], float], *, record: bool = False) -> None:
        self._model = requested_model
        self._tags = reasoning_tags
        self._started = started
        self._now = now
        self._content: list[str] = []
        self._thinking: list[str] = []
        self._tools = ToolCallAssembly()
        self._wire: list[Any] | None = [] if record else None  # the raw tool-call deltas (record_wire)
        self._usage: Usage | None = None
        self._finished: str | None = None  # the finish reason, once a chunk named one
        self._id: str | None = None
        self.done = False
        self._first: float | None = None  # the first content, reasoning or tool-call delta
        self._first_answer: float | None = None  # the first content or tool-call delta
        self._last: float | None = None
        self._tail = ""  # the content's last characters, where a closing tag may begin
        self._closed = False  # the content has had an inline block's closing tag
        self._after_close: float | None = None  # the first answer text after it

    def feed(self, event: str, data: str) -> None:
        """Take one event.

        Raises:
            InvalidResponseError: An error event, a chunk that is not JSON, or a malformed delta.
        """
        if data == _DONE:
            self.done = True
            return
        chunk = _chunk(data)
        if event == "error" or (isinstance(chunk, dict) and "error" in chunk):
            raise InvalidResponseError(f"StreamError: {_error_text(chunk)}")
        if not isinstance(chunk, dict):
            raise InvalidResponseError("InvalidUpstreamJson")
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self._model = chunk["model"]
        if self._id is None:
            self._id = short_text(chunk.get("id"))
        if isinstance(chunk.get("usage"), dict):
            self._usage = parse_usage(chunk)
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise InvalidResponseError("MalformedSuccessPayload")
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        if choice.get("finish_reason"):
            self._finished = short_text(choice["finish_reason"]) or "stop"
        delta = choice.get("delta")
        if delta is None:
            return
        if not isinstance(delta, dict):
            raise InvalidResponseError("MalformedSuccessPayload")
        thought = next((delta[k] for k in ("reasoning_content", "reasoning")
                        if isinstance(delta.get(k), str)), "")
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise InvalidResponseError("MalformedSuccessPayload")
        if thought:
            self._thinking.append(thought)
            self._arrived(answer=False)
        if content:
            self._content.append(content)
            self._arrived(answer=True)
            self._watch_closing_tag(content)
        if delta.get("tool_calls") is not None:
            self._tool_deltas(delta["tool_calls"])

    def _arrived(self, *, answer: bool) -> None:
        now = self._now()
        self._last = now
        if self._first is None:
            self._first = now
        if answer and self._first_answer is None:
            self._first_answer = now

    def _watch_closing_tag(self, piece: str) -> None:
        """Note when answer text first follows an inline block's closing tag; each delta is
        searched with only the few characters before it, however long the thinking."""
        if self._tags is None or self._after_close is not None:
            return
        if self._closed:
            if piece.strip():
                self._after_close = self._last
            return
        closing = self._tags[1]
        window = self._tail + piece
        at = window.find(closing)
        if at < 0:
            self._tail = window[len(window) - len(closing) + 1:] if len(closing) > 1 else ""
            return
        self._closed = True
        if window[at + len(closing):].strip():
            self._after_close = self._last

    def _tool_deltas(self, deltas: Any) -> None:
        if not isinstance(deltas, list):
            raise InvalidResponseError("MalformedSuccessPayload")
        if self._wire is not None:
            self._wire += deltas
        for delta in deltas:
            self._tools.add(delta)
            self._arrived(answer=True)

    def answer(self) -> ChatAnswer:
        """The assembled answer of a stream that ended properly.

        Raises:
            InvalidResponseError: ``StreamCut`` (no ``[DONE]``), ``StreamUnfinished`` (``[DONE]``
                before any ``finish_reason``), or a tool call without a name.
        """
        if not self.done:
            raise InvalidResponseError("StreamCut: the stream ended before [DONE]")
        if self._finished is None:
            raise InvalidResponseError("StreamUnfinished: [DONE] came before any finish_reason")
        calls = self._tools.calls()
        content = "".join(self._content)
        usage = self._usage if self._usage is not None else Usage(reported=False)
        wire = None if self._wire is None else {"content": content, "deltas": self._wire}
        if self._tags is None:
            return ChatAnswer(content, self._model, tuple(calls), usage,
                              timing=self._timing(usage, self._first_answer), finish_reason=self._finished,
                              response_id=self._id, wire=wire)
        split = split_reasoning({"reasoning_content": "".join(self._thinking)}, content, self._tags)
        # Thinking inline in the content: the answer starts after its closing tag.
        answer_at = self._first_answer if split.answer == content else self._after_close
        if answer_at is None and calls:
            answer_at = self._first_answer
        return ChatAnswer(split.answer, self._model, tuple(calls), usage, split.reasoning, split.finished,
                          timing=self._timing(usage, answer_at), finish_reason=self._finished,
                          response_id=self._id, wire=wire)

    def _timing(self, usage: Usage, answer_at: float | None) -> StreamTiming:
        tps = None
        if usage.reported and usage.completion_tokens and self._first is not None and self._last is not None:
            span = self._last - self._first
            tps = usage.completion_tokens / span if span > 0 else None
        return StreamTiming(self._ms(self._first), self._ms(answer_at), tps)

    def _ms(self, at: float | None) -> float | None:
        return None if at is None else (at - self._started) * 1000.0


class ResponsesStreamAssembler(StreamAssembler):
    """Joins the Responses API's typed events (``response.output_text.delta``, the reasoning
    summary's deltas, ``response.output_item.done`` of a function call, ``response.completed``)
    into one answer, each read as the chat chunk it stands for; ``response.failed`` and ``error``
    are the stream's error."""

    def feed(self, event: str, data: str) -> None:
        """Take one event (see the class).

        Raises:
            InvalidResponseError: An error or failed event, or data that is not JSON.
        """
        try:
            found = strictjson.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise InvalidResponseError("InvalidUpstreamJson") from None
        if not isinstance(found, dict):
            raise InvalidResponseError("InvalidUpstreamJson")
        kind = found.get("type") if isinstance(found.get("type"), str) else event
        if kind in ("error", "response.failed"):
            failed = found.get("response") if isinstance(found.get("response"), dict) else found
            raise InvalidResponseError(f"StreamError: {_error_text(failed)}")
        delta = found.get("delta")
        if kind == "response.output_text.delta" and isinstance(delta, str):
            self._delta({"content": delta})
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta") \
                and isinstance(delta, str):
            self._delta({"reasoning_content": delta})
        elif kind == "response.output_item.done" and isinstance(found.get("item"), dict) \
                and found["item"].get("type") == "function_call":
            item = found["item"]
            self._delta({"tool_calls": [{"index": found.get("output_index", 0), "function": {
                "name": item.get("name"), "arguments": item.get("arguments", "")}}]})
        elif kind in ("response.completed", "response.incomplete") \
                and isinstance(found.get("response"), dict):
            reply = chat_reply({**found["response"], "output": []})  # its usage and how it stopped
            if not isinstance(reply, dict) or not reply.get("choices"):
                raise InvalidResponseError(f"StreamError: {_error_text(reply)}")
            if reply.get("usage"):
                self._usage = parse_usage(reply)
            self._id = short_text(reply.get("id")) or self._id
            finish = reply["choices"][0]["finish_reason"] if isinstance(reply, dict) else "stop"
            self._choice({"index": 0, "delta": {}, "finish_reason": finish})
            self.done = True

    def _delta(self, delta: dict[str, Any]) -> None:
        self._choice({"index": 0, "delta": delta})


def _error_text(chunk: Any) -> str:
    """An error event's message: ``error.message``, ``error`` as text, or (the Responses API's
    ``error`` event) ``message`` beside ``code``."""
    error = chunk.get("error") if isinstance(chunk, dict) else chunk
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    if isinstance(chunk, dict) and isinstance(chunk.get("message"), str):
        code = chunk.get("code")
        return f"{code}: {chunk['message']}" if isinstance(code, str) and code else str(chunk["message"])
    return "the server sent an error event"


async def _checked_text(response: httpx.Response, cap: int) -> AsyncIterator[str]:
    """A reply's body as text, decoded as it arrives: capped, and refused unless strict UTF-8
    (a chunk may end inside a character: the next one completes it)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    try:
        async with aclosing(aiter_capped(response, cap)) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                text = decoder.decode(chunk)
                if text:
                    yield text
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise InvalidResponseError("InvalidUpstreamJson") from None
    except BodyTooLarge:
        raise InvalidResponseError("ResponseTooLarge") from None


class _Forward:
    """An async iterator over another, which its owner closes (not a generator: a reader that
    stops early leaves nothing to finalize)."""

    def __init__(self, source: AsyncIterator[str]) -> None:
        self._source = source

    def __aiter__(self) -> _Forward:
        return self

    async def __anext__(self) -> str:
        return await self._source.__anext__()


class _TextEvents(httpx.Response):
    """What ``httpx-sse`` reads events from: the checked text of a reply."""

    def __init__(self, texts: AsyncIterator[str]) -> None:
        super().__init__(200, headers=_SSE_HEADERS)
        self._texts = texts

    def aiter_text(self, chunk_size: int | None = None) -> AsyncIterator[str]:
        return _Forward(self._texts)


async def read_stream(response: httpx.Response, assembler: StreamAssembler, cap: int) -> ChatAnswer:
    """Read a streamed reply to its end and return the assembled answer.

    After ``[DONE]`` the body is read on for at most :data:`AFTER_DONE_S`, so its connection can
    serve the next request; a server that keeps it open longer only costs that connection.

    Args:
        response: The 200 reply, its body not read yet.
        assembler: Joins the events.
        cap: Most decoded bytes the stream may carry (the cap of a whole reply).

    Raises:
        InvalidResponseError: The stream is not a usable answer (see :class:`StreamAssembler`).
        httpx.TransportError: The connection failed mid-stream.
    """
    texts = _checked_text(response, cap)
    async with aclosing(texts), aclosing(EventSource(_TextEvents(texts)).aiter_sse()) as stream:  # type: ignore[type-var]
        async for sse in stream:
            assembler.feed(sse.event, sse.data)
            if assembler.done:
                break
        if assembler.done:
            with trio.move_on_after(AFTER_DONE_S):
                try:
                    async for _ in stream:
                        pass
                except (InvalidResponseError, httpx.TransportError):
                    pass  # the answer was whole; only the connection is lost
    return assembler.answer()


def _chunk(data: str) -> Any:
    """A chunk's JSON, strictly; a lone surrogate escape is let through only inside a tool call's
    arguments, where a server may split a character's surrogate pair over two pieces (they are
    joined when the call is put together).

    Raises:
        InvalidResponseError: Not JSON, or a lone surrogate anywhere else.
    """
    try:
        return strictjson.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        if "surrogate escape" not in str(exc):
            raise InvalidResponseError("InvalidUpstreamJson") from None
    chunk = json.loads(data)
    try:
        choices = chunk["choices"]
        deltas = [call for choice in choices for call in choice["delta"].get("tool_calls") or ()]
        pieces = [call["function"].pop("arguments", None) for call in deltas]
        strictjson.loads(json.dumps(chunk))  # the rest holds none
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InvalidResponseError("InvalidUpstreamJson") from None
    for call, piece in zip(deltas, pieces, strict=True):
        if piece is not None:
            call["function"]["arguments"] = piece
    return chunk


