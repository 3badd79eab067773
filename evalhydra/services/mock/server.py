"""The mock's HTTP/1.1 server: trio sockets, keep-alive, h11 for the hard cases.

Each connection is one trio task that reads a request, answers it and loops,
so a client's pool keeps its connections. To stay cheap at thousands of
requests a second, plain requests (HTTP/1.1, ``Content-Length`` body, no
``Expect`` or ``Transfer-Encoding``) are framed by a small parser in
:mod:`evalhydra.services.mock.wire`; the first request that is anything else hands the
connection to h11, which frames it (chunked bodies, HTTP/1.0, protocol errors
answered 400) for the rest of its life. Handlers never touch the socket: they
return a :class:`~evalhydra.services.mock.wire.Reply` that either path writes in one send.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.utils import formatdate
from functools import lru_cache
from typing import Any

import trio

from evalhydra.services import responses_api
from evalhydra.services.mock import responses, wire
from evalhydra.services.mock.batches import MockBatches
from evalhydra.services.mock.delays import DelayLine
from evalhydra.services.mock.limits import RequestBudget
from evalhydra.services.mock.replies import CHANCE_MARK, reply_for, usage_for
from evalhydra.services.mock.settings import MockSettings
from evalhydra.services.mock.streaming import (
    STREAM_FAULTS,
    finish_reason,
    stream_events,
    tool_wired,
    with_reasoning,
)
from evalhydra.services.mock.wire import Reply

__all__ = ["MockServer", "MockSettings", "MockStats", "open_mock_server", "serve"]

_CHAT_PATHS = frozenset({b"/v1/chat/completions", b"/chat/completions"})


def _origin_form(target: bytes) -> bytes:
    """``/path?query`` from a request target; an absolute URL (what a client sends
    to a forward proxy) loses its scheme and host, so the mock can stand in for an
    HTTP proxy in tests."""
    if target.startswith((b"http://", b"https://")):
        _, _, rest = target.partition(b"://")
        return b"/" + rest.partition(b"/")[2]
    return target
_MODELS_PATHS = frozenset({b"/v1/models", b"/models"})
_EMBEDDINGS_PATHS = frozenset({b"/v1/embeddings", b"/embeddings"})
_RESPONSES_PATHS = frozenset({b"/v1/responses", b"/responses"})
_FAIL = responses.error_body("mock failure", "server_error")
_HTML = b"<html><body>502 Bad Gateway</body></html>"
_RATE_LIMITED = responses.error_body("Rate limit reached for requests", "requests")
_CACHE_MAX_BODY = 4 * 1024  # larger bodies are rendered afresh, never kept (the cache stays small)


@dataclass
class MockStats:
    """Counters of what the server received; ``POST /_mock/reset`` zeroes them.

    Attributes:
        requests: Every HTTP request, any path.
        chat_requests: Chat completion requests, faulted ones included.
        ok: Chat requests answered with a normal completion.
        faults: Chat requests per fault kind (``fail``, ``hang`` ...).
        bad_requests: Chat requests rejected with 400 (body not a JSON object).
        connections: Connections accepted.
        in_flight: Chat requests being handled now.
        max_in_flight: The most chat requests handled at once.
        rate_limited: Chat requests refused with 429 by the rate limit (``rate_limit_rps``).
        batch_lines: Lines of batch jobs answered (not counted in ``chat_requests``).
    """

    requests: int = 0
    chat_requests: int = 0
    ok: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    bad_requests: int = 0
    connections: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    rate_limited: int = 0
    batch_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Return the counters as a JSON-ready dict."""
        return {
            "requests": self.requests,
            "chat_requests": self.chat_requests,
            "ok": self.ok,
            "faults": dict(self.faults),
            "bad_requests": self.bad_requests,
            "connections": self.connections,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "rate_limited": self.rate_limited,
            "batch_lines": self.batch_lines,
        }

    def reset(self) -> None:
        """Zero every counter except ``in_flight``."""
        self.requests = self.chat_requests = self.ok = self.bad_requests = 0
        self.connections = self.max_in_flight = self.rate_limited = self.batch_lines = 0
        self.faults = {}


class MockServer:
    """A mock server: its address, settings, counters and the last request.

    Attributes:
        settings: Read afresh for each request; change fields at any time.
        stats: Counters (see :class:`MockStats`).
        host: Interface it listens on.
        port: Its TCP port, set once bound.
    """

    def __init__(self, settings: MockSettings | None = None, host: str = "127.0.0.1") -> None:
        self.settings = settings if settings is not None else MockSettings()
        self.stats = MockStats()
        self.host = host
        self.port = 0
        self._last_body: bytes | None = None
        self._last_head: bytes | None = None
        self._rng = random.Random(self.settings.seed)
        self._seed = self.settings.seed
        self._delays = DelayLine()
        #: The request budget of ``rate_limit_rps`` (a new bucket after ``reset``).
        self.budget = RequestBudget()
        #: The Files and Batches API (``/v1/files``, ``/v1/batches``).
        self.batches = MockBatches(self._batch_line, lambda: self.settings)

    @property
    def url(self) -> str:
        """The OpenAI base URL, ``http://HOST:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def chat_url(self) -> str:
        """The full chat completions endpoint."""
        return f"{self.url}/chat/completions"

    @property
    def last_request(self) -> dict[str, Any] | None:
        """The last chat request's parsed body (None before the first one)."""
        return None if self._last_body is None else _parse_payload(self._last_body)

    @property
    def last_headers(self) -> dict[str, str] | None:
        """The last chat request's headers, names lower-cased (None before the first one).

        A repeated header's values are joined with ``", "``. Tests use this to
        check what a client sends (e.g. whether ``authorization`` is present).
        """
        return None if self._last_head is None else _parse_headers(self._last_head)

    def reset(self) -> None:
        """Zero the counters, forget the last request and reseed the generator."""
        self.stats.reset()
        self.budget.reset()
        self.batches = MockBatches(self._batch_line, lambda: self.settings)  # files and batches forgotten
        self._last_body = None
        self._last_head = None
        self._reseed()

    def _reseed(self) -> None:
        self._rng.seed(self.settings.seed)
        self._seed = self.settings.seed

    async def serve(self, port: int = 0, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Bind, hand ``self`` to ``task_status``, then serve until cancelled.

        Args:
            port: TCP port; 0 picks a free one.
            task_status: From ``nursery.start``; receives this server.
        """
        listeners = await trio.open_tcp_listeners(port, host=self.host)
        await self.serve_listeners(listeners, task_status=task_status)

    async def serve_listeners(
        self, listeners: list[trio.SocketListener], *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve on already bound listeners (the port is the first one's).

        Args:
            listeners: From ``trio.open_tcp_listeners``; closed when done.
            task_status: From ``nursery.start``; receives this server.
        """
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._delays.run)
            task_status.started(self)
            await trio.serve_listeners(self._connection, listeners)
            nursery.cancel_scope.cancel()  # the timer of the delays ends with the listeners

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.stats.connections += 1
        await wire.serve_connection(stream, self.handle)

    # -- routing --------------------------------------------------------------

    async def handle(self, method: bytes, target: bytes, body: bytes, head: bytes = b"") -> Reply:
        """Answer one request (any path).

        Args:
            method: HTTP method, e.g. ``b"POST"``.
            target: Request target (path and query).
            body: The whole request body.
            head: The raw request head (request line and headers), kept for
                ``/_mock/last_headers`` when this is a chat request.

        Returns:
            What to send back.
        """
        self.stats.requests += 1
        try:
            return await self._route(method, target, body, head)
        except Exception as exc:  # a mock bug must not crash the server
            message = f"mock internal error: {type(exc).__name__}: {exc}"
            return Reply(500, responses.error_body(message, "server_error"))

    async def _route(self, method: bytes, target: bytes, body: bytes, head: bytes) -> Reply:
        path = _origin_form(target).split(b"?", 1)[0].rstrip(b"/")
        if path in _CHAT_PATHS:
            if method != b"POST":
                return Reply(405, responses.error_body("use POST", "invalid_request_error"))
            self._last_head = head
            return await self._chat(body)
        if path in _RESPONSES_PATHS and method == b"POST":
            self._last_head = head
            return await self._responses(body)
        if path in _MODELS_PATHS and method == b"GET":
            return Reply(200, responses.models_body(self.settings.model))
        if path in _EMBEDDINGS_PATHS and method == b"POST":
            return Reply(*responses.embeddings_body(body))
        if path.startswith((b"/_mock/", b"/v1/_mock/")):
            status, answer = self._control(method, path.removeprefix(b"/v1"), body)
            return Reply(status, json.dumps(answer).encode())
        if path.startswith((b"/v1/files", b"/v1/batches")):
            query = _origin_form(target).partition(b"?")[2]
            content_type = _parse_headers(head).get("content-type", "")
            routed = self.batches.route(method, path, query, body, content_type)
            if routed is not None:
                status, answer = routed
                if isinstance(answer, bytes):
                    return Reply(status, answer, wire.OCTETS)
                return Reply(status, json.dumps(answer).encode())
        return Reply(404, responses.error_body("not found", "not_found"))

    def _control(self, method: bytes, path: bytes, body: bytes) -> tuple[int, Any]:
        if method == b"GET":
            getters = {
                b"/_mock/stats": self.stats.to_dict,
                b"/_mock/last": lambda: self.last_request,
                b"/_mock/last_headers": lambda: self.last_headers,
                b"/_mock/health": lambda: {"ok": True},
                b"/_mock/config": self.settings.to_dict,
            }
            if path in getters:
                return 200, getters[path]()
        if method == b"POST" and path == b"/_mock/reset":
            self.reset()
            return 200, self.stats.to_dict()
        if method == b"POST" and path == b"/_mock/config":
            return self._update_settings(body)
        return 404, {"error": {"message": "not found", "type": "not_found"}}

    def _update_settings(self, body: bytes) -> tuple[int, Any]:
        try:
            changes = json.loads(body or b"{}")
            if not isinstance(changes, dict):
                raise ValueError("the body must be a JSON object of settings")
            self.settings.update(changes)
        except ValueError as exc:
            return 400, {"error": {"message": str(exc), "type": "invalid_request_error"}}
        if self.settings.seed != self._seed:
            self._reseed()
        return 200, self.settings.to_dict()

    # -- responses ------------------------------------------------------------

    async def _responses(self, body: bytes) -> Reply:
        """OpenAI's Responses API: the request read as a chat one, the chat logic's answer (delays,
        faults, limits and all) returned as a response object, or its typed events when streamed."""
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise ValueError("the body must be a JSON object")
            chat_body = json.dumps(responses_api.chat_request(request)).encode()
        except (ValueError, TypeError, AttributeError) as exc:
            return Reply(400, responses.error_body(f"invalid request: {exc}", "invalid_request_error"))
        reply = await self._chat(chat_body)
        if reply.status != 200:
            return reply
        chat = json.loads(reply.body)
        answer = responses_api.responses_reply(chat, f"resp_{self.stats.chat_requests:08d}", int(time.time()))
        if request.get("stream"):
            return Reply(200, responses_api.responses_events(answer), wire.EVENT_STREAM)
        return Reply(200, json.dumps(answer).encode(), reply.headers)

    # -- chat -----------------------------------------------------------------

    def _batch_line(self, body: bytes) -> tuple[int, bytes]:
        """A batch line's answer: the chat logic without delay, faults or rate limit."""
        self.stats.batch_lines += 1
        reply = self._answer(body, None, self.stats.batch_lines)
        return reply.status, reply.body

    async def _chat(self, body: bytes) -> Reply:
        if not self.settings.rate_limit_rps:
            return await self._admitted(body)
        admitted, budget = self.budget.take(self.settings)
        if not admitted:
            self.stats.rate_limited += 1
            return Reply(429, _RATE_LIMITED, (*wire.JSON, *budget))
        reply = await self._admitted(body)
        reply.headers = (*reply.headers, *budget)
        return reply

    async def _admitted(self, body: bytes) -> Reply:
        stats = self.stats
        stats.chat_requests += 1
        number = stats.chat_requests
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            fault = self._choose_fault(number)
            if fault != "hang":
                await self._delay()
            return self._answer(body, fault, number)
        finally:
            stats.in_flight -= 1

    def _choose_fault(self, number: int) -> str | None:
        """Pick this request's fault: ``fail_first_n``, then ``fault``, then the rates."""
        s = self.settings
        draw = self._rng.random()
        if number <= s.fail_first_n:
            return "fail"
        if s.fault is not None:
            return s.fault
        for name, rate in (
            ("fail", s.fail_rate),
            ("hang", s.hang_rate),
            ("malformed", s.malformed_rate),
            ("reset", s.reset_rate),
            ("oversized", s.oversized_rate),
        ):
            if draw < rate:
                return name
            draw -= rate
        return None

    async def _delay(self) -> None:
        s = self.settings
        delay = s.latency_ms
        if s.jitter_ms > 0:
            delay += self._rng.uniform(-s.jitter_ms, s.jitter_ms)
        if delay > 0:
            await self._delays.sleep(delay / 1000)

    def _answer(self, body: bytes, fault: str | None, number: int) -> Reply:
        """Build the reply of a chat request, shaped by its fault."""
        s = self.settings
        head = b'{"id":"chatcmpl-mock-%d","object":"chat.completion","created":%d,' % (
            number,
            int(time.time()),
        )
        if (fault is None and s.reasoning is None and s.tool_wire is None and not _wants_stream(body)
                and CHANCE_MARK not in body and not s.noisy_judge):
            rest = _rendered(body, s.model, s.fixed_reply)
            if rest is not None:
                self._last_body = body
                self.stats.ok += 1
                return Reply(200, head + rest)
        payload = _parse_payload(body)
        if payload is None:
            self.stats.bad_requests += 1
            msg = responses.error_body("body must be a JSON object", "invalid_request_error")
            return Reply(400, msg)
        self._last_body = body
        streamed = bool(payload.get("stream"))
        if fault is not None and (streamed or fault not in STREAM_FAULTS):
            self.stats.faults[fault] = self.stats.faults.get(fault, 0) + 1
            if streamed:
                return self._streamed(payload, number, fault)
            return self._faulty(payload, fault, number)
        self.stats.ok += 1
        if not streamed:
            return Reply(200, self._body(payload, None, number))
        return self._streamed(payload, number, None)

    def _faulty(self, payload: dict[str, Any], fault: str, number: int) -> Reply:
        if fault == "fail":
            return Reply(self.settings.fail_status, _FAIL, self._fail_headers())
        if fault == "html":
            return Reply(200, _HTML, wire.HTML)
        if fault == "oversized":
            return Reply(200, responses.oversized_body(self._model(payload)))
        full = self._body(payload, fault, number)
        if fault in ("hang", "stall", "reset"):
            return Reply(200, full, action=fault)
        if fault == "malformed":
            return Reply(200, full[: len(full) // 2])
        return Reply(200, full)

    def _streamed(self, payload: dict[str, Any], number: int, fault: str | None) -> Reply:
        """A ``stream: true`` answer as server-sent events (a body fault such as ``hang`` or
        ``fail`` answers as it does a whole reply)."""
        if fault is not None and fault not in STREAM_FAULTS and fault != "no_usage":
            return self._faulty(payload, fault, number)
        s = self.settings
        message = self._message(payload, None)
        options = payload.get("stream_options")
        wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        usage = usage_for(payload, message) if wants_usage and fault != "no_usage" else None
        head = {"id": f"chatcmpl-mock-{number}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": self._model(payload)}
        events = stream_events(head, message, usage, delta_chars=s.stream_delta_chars, fault=fault,
                               wire=s.tool_wire)
        if s.stream_split_bytes:
            whole = b"".join(events)
            events = [whole[i:i + s.stream_split_bytes] for i in range(0, len(whole), s.stream_split_bytes)]
        return Reply(200, b"", wire.EVENT_STREAM, action="cut" if fault == "stream_cut" else None,
                     events=events, event_delay_s=s.stream_delay_ms / 1000)

    def _model(self, payload: dict[str, Any]) -> str:
        model = payload.get("model") or self.settings.model
        return model if isinstance(model, str) else str(model)

    def _body(self, payload: dict[str, Any], fault: str | None, number: int) -> bytes:
        """Build a completion body shaped by a body fault (``missing_choices`` ...)."""
        message = self._message(payload, fault)
        usage = None if fault == "no_usage" else usage_for(payload, message)
        cid, created = f"chatcmpl-mock-{number}", int(time.time())
        wire = self.settings.tool_wire
        body = responses.completion(cid, created, self._model(payload), tool_wired(message, wire), usage,
                                    finish_reason(message, wire))
        if fault == "missing_choices":
            del body["choices"]
        elif fault == "empty_choices":
            body["choices"] = []
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()

    def _message(self, payload: dict[str, Any], fault: str | None) -> dict[str, Any]:
        if fault == "content_null":
            return {"role": "assistant", "content": None}
        s = self.settings
        fixed = s.fixed_reply
        if fixed is not None:
            message = {"role": "assistant", "content": fixed}
        else:
            errors = (s.judge_sensitivity, s.judge_specificity) if s.noisy_judge else None
            message = reply_for(payload, self._rng.random, judge_errors=errors)
        shape = s.reasoning
        return message if shape is None else with_reasoning(message, payload, shape)

    def _fail_headers(self) -> tuple[tuple[bytes, bytes], ...]:
        s = self.settings
        if s.retry_after_s is None:
            return wire.JSON
        if s.retry_after_http_date:
            value = formatdate(time.time() + s.retry_after_s, usegmt=True)
        else:
            value = _seconds(s.retry_after_s)
        return (*wire.JSON, (b"retry-after", value.encode()))


def _seconds(value: float) -> str:
    """Format seconds for ``Retry-After`` ("2", "0.5")."""
    return str(int(value)) if value == int(value) else f"{value:g}"


def _parse_payload(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def _parse_headers(head: bytes) -> dict[str, str]:
    """Header lines of a raw request head as ``{lower-case name: value}``."""
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        key, text = name.strip().lower().decode("latin-1"), value.strip().decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


def _wants_stream(body: bytes) -> bool:
    """Cheap pre-check: only bodies mentioning ``"stream"`` can ask for SSE."""
    return b'"stream"' in body and bool((_parse_payload(body) or {}).get("stream"))


def _rendered(body: bytes, default_model: str, fixed_reply: str | None) -> bytes | None:
    """Return a plain completion's JSON after its ``id`` and ``created`` fields.

    Small bodies are cached on their exact bytes, so repeated requests (trials,
    benchmarks) skip parsing and reply computation. None when the body is not
    a JSON object.
    """
    if len(body) <= _CACHE_MAX_BODY:
        return _rendered_cached(body, default_model, fixed_reply)
    return _render(body, default_model, fixed_reply)


def _render(body: bytes, default_model: str, fixed_reply: str | None) -> bytes | None:
    payload = _parse_payload(body)
    if payload is None:
        return None
    model = payload.get("model") or default_model
    model = model if isinstance(model, str) else str(model)
    if fixed_reply is not None:
        message: dict[str, Any] = {"role": "assistant", "content": fixed_reply}
    else:
        message = reply_for(payload)
    whole = responses.chat_body("", 0, model, message, usage_for(payload, message))
    return whole[whole.index(b'"model":') :]


#: Distinct bodies remembered: a bench cycles through its 2,000 cases once per trial, and an LRU
#: smaller than that cycle would never hit (an entry is one small reply body).
_CACHE_ENTRIES = 4096
_rendered_cached = lru_cache(maxsize=_CACHE_ENTRIES)(_render)


async def serve(
    settings: MockSettings | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a mock server until cancelled (use with ``nursery.start``).

    Args:
        settings: The switches; ``MockSettings()`` when None. The server keeps
            this object, so changing its fields later changes the server.
        host: Interface to bind.
        port: TCP port; 0 picks a free one.
        task_status: From ``nursery.start``; receives the :class:`MockServer`.

    Example:
        ``server = await nursery.start(serve, MockSettings(latency_ms=5))``,
        then point a client at ``server.url``.
    """
    await MockServer(settings, host).serve(port, task_status=task_status)


@asynccontextmanager
async def open_mock_server(
    settings: MockSettings | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[MockServer]:
    """Serve a mock for the duration of an ``async with`` block.

    Args:
        settings: The switches; ``MockSettings()`` when None.
        host: Interface to bind.
        port: TCP port; 0 picks a free one.

    Yields:
        The running :class:`MockServer`.
    """
    async with trio.open_nursery() as nursery:
        server: MockServer = await nursery.start(MockServer(settings, host).serve, port)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
