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
from typing import Any

import trio

from evalhydra.services import responses_api
from evalhydra.services.mock import responses, wire
from evalhydra.services.mock.batches import MockBatches
from evalhydra.services.mock.chat import ChatAnswers, parse_payload
from evalhydra.services.mock.delays import DelayLine
from evalhydra.services.mock.limits import RequestBudget
from evalhydra.services.mock.settings import MockSettings
from evalhydra.services.mock.stats import MockStats
from evalhydra.services.mock.tool_faults import unanswered_output, unpaired
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
_RATE_LIMITED = responses.error_body("Rate limit reached for requests", "requests")


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
        self._last_head: bytes | None = None
        self._rng = random.Random(self.settings.seed)
        #: The chat answers (faults drawn and replies built from the settings).
        self.chat = ChatAnswers(lambda: self.settings, self.stats, self._rng)
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
        body = self.chat.last_body
        return None if body is None else parse_payload(body)

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
        self.chat.last_body = None
        self._last_head = None
        self._reseed()

    def _reseed(self) -> None:
        self._rng.seed(self.settings.seed)
        self.chat.reseed(self.settings.seed)
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
        orphan = unanswered_output(request)
        if orphan is not None:  # as OpenAI refuses it
            return Reply(400, responses.error_body(f"No tool call found for function call output with call_id"
                                                   f" {orphan!r}.", "invalid_request_error"))
        reply = await self._chat(chat_body)
        if reply.status != 200:
            return reply
        chat = json.loads(reply.body)
        answer = responses_api.responses_reply(chat, f"resp_{self.stats.chat_requests:08d}", int(time.time()))
        answer = unpaired(answer, self.chat.wires)  # the shapes drawn for this request (tool_wire_rate)
        if request.get("stream"):
            return Reply(200, responses_api.responses_events(answer), wire.EVENT_STREAM)
        return Reply(200, json.dumps(answer).encode(), reply.headers)

    # -- chat -----------------------------------------------------------------

    def _batch_line(self, body: bytes) -> tuple[int, bytes]:
        """A batch line's answer: the chat logic without delay, faults or rate limit."""
        self.stats.batch_lines += 1
        reply = self.chat.answer(body, None, self.stats.batch_lines)
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
            fault = self.chat.choose_fault(number)
            if fault != "hang":
                await self._delay()
            return self.chat.answer(body, fault, number)
        finally:
            stats.in_flight -= 1

    async def _delay(self) -> None:
        s = self.settings
        delay = s.latency_ms
        if s.jitter_ms > 0:
            delay += self._rng.uniform(-s.jitter_ms, s.jitter_ms)
        if delay > 0:
            await self._delays.sleep(delay / 1000)

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
