"""A lean HTTP/1.1 transport for trio under httpx's API, replies parsed by ``httptools``.

``httpx.AsyncHTTPTransport`` spends most of a small request's CPU in httpcore
and h11 (pure-Python framing, per-event objects, pool bookkeeping), several
times what raw trio sockets spend (``bench/throughput.py`` measures both).
:class:`LeanTransport` keeps httpx's interface (``httpx.Request`` in,
``httpx.Response`` out, httpx's exception types) and does the wire work itself:

* a keep-alive pool of at most ``max_connections`` connections (idle ones are
  reused newest first and dropped after ``keepalive_expiry`` seconds);
* the request head and its body are written as one buffer, straight to the socket;
* the reply is framed by llhttp (``httptools``): ``Content-Length``, chunked and
  close-delimited bodies; ``Content-Encoding`` is left to ``httpx.Response``,
  which decodes gzip and deflate as it does for its own transport;
* TLS through ``trio.SSLStream`` with the context httpx builds
  (``httpx.create_ssl_context``: ``SSL_CERT_FILE``, ``SSL_CERT_DIR``, ``verify``);
* the connect, read, write and pool timeouts of the request's ``timeout``
  extension, raising ``httpx.ConnectTimeout``, ``ReadTimeout``, ``WriteTimeout``
  and ``PoolTimeout``; and the request's :data:`DEADLINE` extension, if any: the
  trio time by which the whole exchange, body included, must end, else
  ``trio.TooSlowError`` (an evalhydra attempt's timeout, without the cancel
  scope that ``trio.fail_after`` would cost each request). Socket waits are
  watched by one timer (:mod:`evalhydra.http.deadlines`), not a scope each;
* a reused connection that the server closed before it sent any byte of the
  reply (a keep-alive race) is replaced by a fresh one and the request sent
  again, once, inside the same call; an idle one that is readable (closed, or
  holding stray bytes) is never reused.

A reply that arrived whole with its head (nearly every chat completion) frees
its connection before :meth:`LeanTransport.handle_async_request` returns; a
longer one is streamed from the socket and frees it when the response closes.
Proxies are not spoken here: :mod:`evalhydra.http.pool` gives a service with a
proxy httpx's own transport.
"""

from __future__ import annotations

import logging
import math
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import httptools
import httpx
import trio

from evalhydra.http.connection import (
    Connection,
    Origin,
    StaleConnection,
    end_time,
    open_connection,
    timed_out,
)
from evalhydra.http.deadlines import DEADLINE, SocketDeadlines

__all__ = ["DEADLINE", "CompleteBody", "LeanTransport"]

#: DEBUG: each connection opened and each reply's status line (never a header or a body).
log = logging.getLogger("evalhydra.http")
_PORTS = {b"http": 80, b"https": 443}
_BODILESS_STATUS = frozenset({204, 304})
#: The most bytes of status lines and headers one reply may send (interim replies included), and
#: the most headers and interim (1xx) replies: beyond them an endpoint is flooding, not replying.
#: h11, httpx's own parser, stops a head at 64 KiB too.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 256
MAX_INTERIM_REPLIES = 16


class _Reply:
    """llhttp's callbacks for one response: status, headers, body chunks, completion.

    An interim reply (``100 Continue``) is forgotten as it ends; the final one
    follows on the same parser.
    """

    __slots__ = ("parser", "reason", "headers", "body", "headers_done", "complete", "started", "keep_alive",
                 "trailing", "head_bytes", "interim")

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.reset()

    def reset(self) -> None:
        """Ready for the connection's next reply (llhttp itself is ready once a reply ends)."""
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.headers_done = False
        self.complete = False
        self.started = False  # any byte of the reply received
        self.keep_alive = False  # read while parsing: llhttp forgets it once the message ends
        self.trailing = False  # bytes came after the reply ended: the connection is not reused
        self.head_bytes = 0  # bytes read before the final reply's headers ended
        self.interim = 0  # interim (1xx) replies read

    def take_body(self) -> list[bytes]:
        """The body chunks parsed so far, which the reply no longer holds."""
        chunks = self.body
        self.body = []
        return chunks

    def on_message_begin(self) -> None:
        if self.complete:
            self.trailing = True

    def on_status(self, reason: bytes) -> None:
        self.reason = reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = not self._interim()
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, chunk: bytes) -> None:
        self.body.append(chunk)

    def on_message_complete(self) -> None:
        if self._interim():
            self.reason, self.headers, self.body = b"", [], []
            self.interim += 1
        else:
            self.complete = True
            self.keep_alive = self.parser.should_keep_alive()

    def _interim(self) -> bool:
        return 100 <= self.parser.get_status_code() < 200


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over trio streams with an ``httptools`` parser, behind httpx's transport API.

    Args:
        max_connections: Most connections open at once (over every origin); a
            request waits for one up to the ``pool`` timeout.
        ssl_context: For ``https`` URLs; None builds httpx's default
            (``httpx.create_ssl_context()``, which honours ``SSL_CERT_FILE``
            and ``SSL_CERT_DIR``).
        keepalive_expiry: Seconds an idle connection is kept for reuse.
    """

    def __init__(self, max_connections: int = 100, *, ssl_context: ssl.SSLContext | None = None,
                 keepalive_expiry: float = 30.0) -> None:
        self._slots = trio.Semaphore(max(1, max_connections))
        self._ssl_context = ssl_context
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[Origin, list[Connection]] = {}
        self._closed = False
        self._deadlines = SocketDeadlines()
        self._last_head: list[Any] = [None, b"", False]  # see _encode

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its response (its body may still be streaming).

        Raises:
            httpx.TransportError: A connect, read, write, pool or protocol failure
                (httpx's own subclasses, as ``httpx.AsyncHTTPTransport`` raises).
            trio.TooSlowError: The request's :data:`DEADLINE` passed first.
        """
        extensions = request.extensions
        timeouts: dict[str, float | None] = extensions.get("timeout", {})
        deadline: float = extensions.get(DEADLINE, math.inf)
        origin = _origin(request.url)
        message = await _encode(request, self._last_head)
        await self._take_slot(timeouts.get("pool"), deadline, request)
        try:
            connection = self._idle_connection(origin)
            if connection is not None:
                try:
                    return await self._exchange(connection, request, message, timeouts, deadline, reused=True)
                except StaleConnection:
                    pass  # the server closed it while idle: once more on a new connection
            connection = await open_connection(origin, timeouts.get("connect"), request, self._tls_context,
                                               self._deadlines, deadline)
            log.debug("connected to %s://%s:%d", origin[0].decode(), origin[1], origin[2])
            return await self._exchange(connection, request, message, timeouts, deadline, reused=False)
        except BaseException:
            self._slots.release()
            raise

    async def aclose(self) -> None:
        """Close every idle connection; later requests are refused."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.aclose()

    # ------------------------------------------------------------------ pool

    async def _take_slot(self, timeout: float | None, deadline: float, request: httpx.Request) -> None:
        if self._closed:
            raise httpx.ConnectError("the transport is closed", request=request)
        try:
            self._slots.acquire_nowait()
            return
        except trio.WouldBlock:
            pass
        end = end_time(timeout, deadline)
        with trio.move_on_at(end):
            await self._slots.acquire()
            return
        raise timed_out(end, deadline, httpx.PoolTimeout("no connection was free within the pool timeout",
                                                         request=request))

    def _idle_connection(self, origin: Origin) -> Connection | None:
        connections = self._idle.get(origin)
        now = time.monotonic()
        while connections:
            connection = connections.pop()
            if now - connection.idle_since < self._keepalive_expiry and not connection.readable():
                return connection
            connection.close()
        return None

    def _release(self, connection: Connection | None) -> None:
        """Give the slot back, and the connection to the idle list (None: it was closed)."""
        self._slots.release()
        if connection is None:
            return
        if self._closed:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._idle.setdefault(connection.origin, []).append(connection)

    def _hand_back(self, connection: Connection, reply: _Reply) -> list[bytes]:
        """A complete reply's body; its connection goes back to the pool, or is closed."""
        chunks = reply.take_body()
        # llhttp's keep-alive is already false for a body that only the stream's end frames
        # (llhttp_should_keep_alive is false when llhttp_message_needs_eof).
        if reply.keep_alive and not reply.trailing:
            self._release(connection)
        else:
            self._release(None)
            connection.close()
        return chunks

    def _tls_context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        return self._ssl_context

    # -------------------------------------------------------------- exchange

    async def _exchange(self, connection: Connection, request: httpx.Request, message: bytes,
                        timeouts: dict[str, float | None], deadline: float, *,
                        reused: bool) -> httpx.Response:
        reply = connection.reply  # one per connection: a parser costs more to make than to reset
        if reply is None:
            reply = connection.reply = _Reply()
        else:
            reply.reset()
        read_timeout = timeouts.get("read")
        try:
            await connection.send(message, timeouts.get("write"), request, reused, deadline)
            while not reply.headers_done:
                await self._read(connection, reply, read_timeout, deadline, request, reused)
        except BaseException:
            await connection.aclose()
            raise
        status = reply.parser.get_status_code()
        if log.isEnabledFor(logging.DEBUG):
            reason = reply.reason.decode("latin-1")
            log.debug('%s %s "HTTP/1.1 %d %s"', request.method, request.url, status, reason)
        if request.method == "HEAD" or status in _BODILESS_STATUS:
            if not reply.complete:  # llhttp, which never saw the request, awaits a body: a new one next
                connection.reply = None
            reply.complete, reply.body = True, []
        stream: httpx.AsyncByteStream
        if reply.complete:
            stream = CompleteBody(self._hand_back(connection, reply))
        else:
            stream = _Body(self, connection, reply, read_timeout, deadline, request)
        return httpx.Response(status, headers=reply.headers, stream=stream, request=request,
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": reply.reason})

    async def _read(self, connection: Connection, reply: _Reply, timeout: float | None, deadline: float,
                    request: httpx.Request, reused: bool = False) -> None:
        """Feed one read of the connection to the reply's parser."""
        data = await connection.receive(timeout, request, reused and not reply.started, deadline,
                                        sent=not reply.started)
        if not data:
            if reused and not reply.started:
                raise StaleConnection
            if reply.headers_done and not _framed(reply.headers):
                reply.complete = True  # a close-delimited body ends with the stream
                return
            what = "a complete message body" if reply.headers_done else "a response"
            raise httpx.RemoteProtocolError(f"Server disconnected without sending {what}.", request=request)
        if reply.started:  # a reply that takes several reads: let other tasks (and Ctrl-C) run,
            await trio.lowlevel.checkpoint()  # and end it at its deadline even while bytes keep coming
            if trio.current_time() >= deadline:
                raise trio.TooSlowError
        reply.started = True
        try:
            reply.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            if reply.complete:  # the reply is whole; bytes after it only retire the connection
                reply.trailing = True
            elif isinstance(exc, httptools.HttpParserUpgrade):
                raise httpx.RemoteProtocolError("the server switched protocols", request=request) from None
            else:
                raise httpx.RemoteProtocolError(f"malformed reply: {exc}", request=request) from None
        if not reply.headers_done:
            _check_head(reply, len(data), request)


def _check_head(reply: _Reply, read: int, request: httpx.Request) -> None:
    """Refuse a reply head that floods: too many bytes, headers or interim replies."""
    reply.head_bytes += read
    if reply.head_bytes > MAX_HEAD_BYTES:
        raise httpx.RemoteProtocolError(f"the reply's head is over {MAX_HEAD_BYTES // 1024} KiB",
                                        request=request)
    if len(reply.headers) > MAX_HEADERS:
        raise httpx.RemoteProtocolError(f"the reply has over {MAX_HEADERS} headers", request=request)
    if reply.interim > MAX_INTERIM_REPLIES:
        raise httpx.RemoteProtocolError(f"over {MAX_INTERIM_REPLIES} interim (1xx) replies", request=request)


class _Body(httpx.AsyncByteStream):
    """A reply's body, read from its connection as the response is read.

    The connection goes back to the pool when the body has ended and both sides
    keep it alive; it is closed when the response is closed early or fails.
    """

    def __init__(self, transport: LeanTransport, connection: Connection, reply: _Reply,
                 timeout: float | None, deadline: float, request: httpx.Request) -> None:
        self._transport = transport
        self._connection: Connection | None = connection
        self._reply = reply
        self._timeout = timeout
        self._deadline = deadline
        self._request = request

    def finish(self) -> list[bytes]:
        """The rest of a complete reply's body; its connection is handed back."""
        connection, self._connection = self._connection, None
        if connection is None:
            return self._reply.take_body()
        return self._transport._hand_back(connection, self._reply)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        reply = self._reply
        while self._connection is not None:
            if reply.complete:
                for chunk in self.finish():
                    yield chunk
                return
            if reply.body:
                for chunk in reply.take_body():
                    yield chunk
            try:
                await self._transport._read(self._connection, reply, self._timeout, self._deadline,
                                            self._request)
            except BaseException:
                await self.aclose()
                raise

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._transport._release(None)
            await connection.aclose()


class CompleteBody(httpx.AsyncByteStream):
    """A reply's body that arrived whole with its head: its connection is already back in
    the pool, so closing it does nothing and a reader may take :attr:`chunks` directly."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[bytes]) -> None:
        #: The body as received (still encoded if the reply has a ``Content-Encoding``).
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


# ---------------------------------------------------------------- helpers


def _origin(url: httpx.URL) -> Origin:
    scheme = url.raw_scheme
    if scheme not in _PORTS:
        raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url.scheme}://'.")
    return scheme, url.host, url.port or _PORTS[scheme]


async def _encode(request: httpx.Request, last: list[Any]) -> bytes:
    """The request's head and body as they go on the wire.

    ``last`` is the transport's ``[(method, target, raw headers), head, chunked]`` of the
    request before: a service's calls share their heads (a case's trials, all of them), and
    building one is most of this function's work.
    """
    if isinstance(request.stream, httpx.ByteStream):
        body = b"".join(request.stream)  # in memory: no read needed
    else:
        try:
            body = request.content
        except httpx.RequestNotRead:
            body = await request.aread()
    key = (request.method, request.url.raw_path, request.headers.raw)
    if key == last[0]:
        head, chunked = last[1], last[2]
    else:
        head, chunked = _head(request, *key)
        last[:] = [key, head, chunked]
    if chunked:
        body = (b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)) if body else b"0\r\n\r\n"
    return head + body


def _head(request: httpx.Request, method: str, target: bytes,
          headers: list[tuple[bytes, bytes]]) -> tuple[bytes, bool]:
    """The request line and headers as sent, blank line included, and whether the body is chunked."""
    request_line = b"%s %s HTTP/1.1" % (method.encode("ascii"), target)
    head = b"\r\n".join([request_line, *map(b": ".join, headers)])
    if head.count(b"\n") != len(headers) or head.count(b"\r") != len(headers):  # one CRLF per header
        raise httpx.LocalProtocolError("a header name or value holds a line break", request=request)
    chunked = b"\r\ntransfer-encoding: " in head.lower()  # each header starts a line: this is its name
    return head + b"\r\n\r\n", chunked


def _framed(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the reply's body has an end of its own (a length or chunks), not the stream's."""
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-length":
            return True
        if lowered == b"transfer-encoding" and b"chunked" in value.lower():
            return True
    return False
