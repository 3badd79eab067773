"""One HTTP connection's byte stream: a plain non-blocking socket, or TLS over trio.

:class:`PlainConnection` calls the socket itself and waits on trio's I/O only
when the kernel would block (``trio.SocketStream`` adds an error-translating
context manager and two checkpoints to every call). :class:`TLSConnection` is
a ``trio.SSLStream``. Both raise httpx's exception types, so a caller of the
transport sees what ``httpx.AsyncHTTPTransport`` would raise:

* a timeout (``None``: none) runs out: ``httpx.ConnectTimeout``, ``WriteTimeout``
  or ``ReadTimeout``;
* the peer resets or the socket fails: ``httpx.ConnectError``, ``WriteError``
  or ``ReadError``;
* a reused connection turns out closed before any byte of the reply:
  :class:`StaleConnection`, which the transport answers with a fresh connection.

Every call also takes ``deadline``: the trio time by which the caller's whole
exchange must end (an evalhydra attempt's timeout; ``math.inf``: none). When
it, rather than the call's own timeout, ends a wait, the call raises
``trio.TooSlowError``, as the attempt's ``fail_after`` would have. A plain
socket's waits are watched by the transport's
:class:`~evalhydra.http.deadlines.SocketDeadlines`, not a cancel scope each:
a scope costs more than the rest of a read.
"""

from __future__ import annotations

import errno
import math
import os
import select
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import trio

from evalhydra.http.deadlines import EXPIRED, SocketDeadlines

__all__ = ["Connection", "PlainConnection", "StaleConnection", "TLSConnection", "end_time", "open_connection",
           "timed_out"]

READ_SIZE = 65536
Origin = tuple[bytes, str, int]


class StaleConnection(Exception):
    """A reused connection was closed by the server before any byte of the reply."""


async def open_connection(origin: Origin, timeout: float | None, request: httpx.Request,
                          ssl_context: Callable[[], ssl.SSLContext], deadlines: SocketDeadlines,
                          deadline: float = math.inf) -> Connection:
    """Connect to ``origin`` (``(scheme, host, port)``), with TLS for ``https``.

    Raises:
        httpx.ConnectError: Refused, unreachable, unresolvable, or the TLS handshake failed.
        httpx.ConnectTimeout: ``timeout`` seconds passed first.
        trio.TooSlowError: ``deadline`` passed first.
    """
    scheme, host, port = origin
    end = end_time(timeout, deadline)
    with trio.move_on_at(end):
        try:
            sock = await _connect_socket(host, port)
            if scheme != b"https":
                return PlainConnection(sock, origin, deadlines)
            return await TLSConnection.handshake(sock, origin, ssl_context())
        except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
            raise httpx.ConnectError(_describe(exc), request=request) from exc
    raise timed_out(end, deadline, httpx.ConnectTimeout("timed out while connecting", request=request))


async def _connect_socket(host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket to the first address of ``host`` that answers."""
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError = OSError(errno.EADDRNOTAVAIL, f"no address for {host}")
    failures = []
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock.connect(address)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, os.strerror(code)) from None
            return sock
        except OSError as exc:
            sock.close()
            failures.append(exc)
        except BaseException:
            sock.close()
            raise
    if failures:  # trio.open_tcp_stream's wording, which the summary has always shown
        error = OSError(f"all attempts to connect to {host}:{port} failed")
        error.__cause__ = failures[-1]
    raise error


class PlainConnection:
    """HTTP over a plain TCP socket, calling it directly; its waits are watched by ``deadlines``."""

    __slots__ = ("sock", "origin", "idle_since", "deadlines", "reply", "_idle")

    def __init__(self, sock: socket.socket, origin: Origin, deadlines: SocketDeadlines) -> None:
        self.sock = sock
        self.origin = origin
        self.idle_since = 0.0
        self.deadlines = deadlines
        #: The transport's reply parser for this connection (its replies come one at a time).
        self.reply: Any = None
        self._idle = _IdleCheck(sock)

    async def send(self, data: bytes, timeout: float | None, request: httpx.Request, reused: bool,
                   deadline: float = math.inf) -> None:
        """Write all of ``data``."""
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                await self._wait(trio.lowlevel.wait_writable, timeout, deadline, httpx.WriteTimeout, request)
            except OSError as exc:
                raise _failure(exc, reused, httpx.WriteError, request) from exc

    async def receive(self, timeout: float | None, request: httpx.Request, stale_if_reset: bool,
                      deadline: float = math.inf, sent: bool = False) -> bytes:
        """The next bytes from the peer; ``b""`` once it has closed its side.

        ``sent``: the request has just been written, so its reply is not here yet: the
        socket is waited on first, which saves the read that would fail with EAGAIN (a
        system call and a raised ``BlockingIOError``, every request).
        """
        if sent:
            await self._wait(trio.lowlevel.wait_readable, timeout, deadline, httpx.ReadTimeout, request)
        while True:
            try:
                return self.sock.recv(READ_SIZE)
            except BlockingIOError:
                await self._wait(trio.lowlevel.wait_readable, timeout, deadline, httpx.ReadTimeout, request)
            except OSError as exc:
                raise _failure(exc, stale_if_reset, httpx.ReadError, request) from exc

    async def _wait(self, wait: Callable[[socket.socket], Awaitable[None]], timeout: float | None,
                    deadline: float, error: type[httpx.TimeoutException], request: httpx.Request) -> None:
        """Wait until the socket is ready: ``error`` after ``timeout`` seconds, or
        ``trio.TooSlowError`` at ``deadline`` if that comes first."""
        end = end_time(timeout, deadline)
        if end == math.inf:
            await wait(self.sock)
            return
        entry = self.deadlines.arm(end, self.sock)
        try:
            await wait(self.sock)
        except trio.ClosedResourceError:
            if entry[3] != EXPIRED:
                raise
            if end >= deadline:  # (not timed_out: this message needs the timeout, None here)
                raise trio.TooSlowError from None
            raise error(f"timed out after {timeout:g} s", request=request) from None
        finally:
            self.deadlines.disarm(entry)

    def readable(self) -> bool:
        """Whether the idle socket has bytes or an end of stream waiting (see :class:`_IdleCheck`)."""
        return self._idle.readable()

    async def aclose(self) -> None:
        """Close the socket (nothing waits on it: a connection has one user at a time)."""
        self.close()

    def close(self) -> None:
        """Close the socket now."""
        if self.sock.fileno() >= 0:
            trio.lowlevel.notify_closing(self.sock)
            self.sock.close()


class TLSConnection:
    """HTTP over TLS: a ``trio.SSLStream`` on the socket."""

    __slots__ = ("stream", "origin", "idle_since", "reply", "_idle")

    def __init__(self, stream: trio.SSLStream[trio.SocketStream], origin: Origin) -> None:
        self.stream = stream
        self.origin = origin
        self.idle_since = 0.0
        #: The transport's reply parser for this connection (its replies come one at a time).
        self.reply: Any = None
        self._idle = _IdleCheck(stream.transport_stream.socket)

    @classmethod
    async def handshake(cls, sock: socket.socket, origin: Origin, context: ssl.SSLContext) -> TLSConnection:
        """Wrap a connected socket in TLS and complete the handshake (closing it on failure)."""
        tcp = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        stream = trio.SSLStream(tcp, context, server_hostname=origin[1], https_compatible=True)
        try:
            await stream.do_handshake()
        except BaseException:
            await trio.aclose_forcefully(tcp)
            raise
        return cls(stream, origin)

    async def send(self, data: bytes, timeout: float | None, request: httpx.Request, reused: bool,
                   deadline: float = math.inf) -> None:
        """Write all of ``data``."""
        end = end_time(timeout, deadline)
        with trio.move_on_at(end):
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, OSError) as exc:
                raise _failure(exc, reused, httpx.WriteError, request) from exc
            return
        error = httpx.WriteTimeout("timed out while sending the request", request=request)
        raise timed_out(end, deadline, error)

    async def receive(self, timeout: float | None, request: httpx.Request, stale_if_reset: bool,
                      deadline: float = math.inf, sent: bool = False) -> bytes:
        """The next bytes from the peer; ``b""`` once it has closed its side (``sent``: unused,
        as a TLS stream reads records, not the socket)."""
        end = end_time(timeout, deadline)
        with trio.move_on_at(end):
            try:
                return bytes(await self.stream.receive_some(READ_SIZE))
            except (trio.BrokenResourceError, OSError) as exc:
                raise _failure(exc, stale_if_reset, httpx.ReadError, request) from exc
        error = httpx.ReadTimeout("timed out while reading the reply", request=request)
        raise timed_out(end, deadline, error)

    def readable(self) -> bool:
        """Whether the idle socket has bytes or an end of stream waiting (see :class:`_IdleCheck`)."""
        return self._idle.readable()

    async def aclose(self) -> None:
        """Close the stream without waiting for the peer."""
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(self.stream)

    def close(self) -> None:
        """Close the underlying socket now (no TLS close_notify)."""
        self.stream.transport_stream.socket.close()


Connection = PlainConnection | TLSConnection


def end_time(timeout: float | None, deadline: float) -> float:
    """When a call must end: after ``timeout`` seconds from now, or at ``deadline`` if sooner."""
    return deadline if timeout is None else min(deadline, trio.current_time() + timeout)


def timed_out(end: float, deadline: float, error: Exception) -> Exception:
    """What a call that ran out of time at ``end`` raises: ``trio.TooSlowError`` when the
    caller's ``deadline`` ended it, else its own timeout ``error``."""
    return trio.TooSlowError() if end >= deadline else error


class _IdleCheck:
    """An idle connection's socket is readable only if the server closed it or sent stray bytes:
    either way it must not carry the next request (httpcore drops such connections too). The
    socket's poller is made at the first check, not at each reuse."""

    __slots__ = ("sock", "poller")

    def __init__(self, sock: socket.socket | trio.socket.SocketType) -> None:
        self.sock = sock
        self.poller: select.poll | None = None

    def readable(self) -> bool:
        """Whether the socket is closed, or has bytes or an end of stream waiting."""
        if self.sock.fileno() < 0:
            return True
        if self.poller is None:
            self.poller = select.poll()
            self.poller.register(self.sock.fileno(), select.POLLIN)
        return bool(self.poller.poll(0))


def _failure(exc: BaseException, stale: bool, error: type[httpx.TransportError],
             request: httpx.Request) -> Exception:
    """What a failed read or write raises: :class:`StaleConnection` on a reused connection
    before any byte of the reply, else httpx's ``error``."""
    return StaleConnection() if stale else error(_describe(exc), request=request)


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
    return str(cause) or type(cause).__name__
