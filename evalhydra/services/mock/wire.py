"""HTTP/1.1 framing for the mock: a fast path for plain requests, h11 for the rest.

A plain request is ``HTTP/1.1`` with a ``Host`` header, an optional
``Content-Length`` body, and no ``Transfer-Encoding`` or ``Expect`` header:
what httpx, the ``openai`` client and curl send. Its head is split with bytes
methods (a few microseconds) and its answer is written as one prebuilt byte
string. Anything else (chunked bodies, HTTP/1.0, odd or invalid headers, very
large bodies) hands the connection to h11, which frames and validates it and
answers protocol errors with a 4xx, for the rest of the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus

import h11
import trio

from evalhydra.services.mock.responses import error_body

__all__ = [
    "EVENT_STREAM",
    "HTML",
    "JSON",
    "OCTETS",
    "Handler",
    "Header",
    "Reply",
    "encode",
    "parse_head",
    "serve_connection",
]

Header = tuple[bytes, bytes]
JSON: tuple[Header, ...] = ((b"content-type", b"application/json"),)
OCTETS: tuple[Header, ...] = ((b"content-type", b"application/octet-stream"),)
HTML: tuple[Header, ...] = ((b"content-type", b"text/html"),)
EVENT_STREAM: tuple[Header, ...] = ((b"content-type", b"text/event-stream"),)

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
_RECV = 65536
_ABORTED = (trio.BrokenResourceError, trio.ClosedResourceError)
_REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}


class Reply:
    """What a handler answers.

    Attributes:
        status: HTTP status.
        body: The whole body (``Content-Length`` is added when sending).
        headers: Other headers, content type first.
        action: None for a normal answer, or a connection-level fault:
            ``"hang"`` (send nothing), ``"stall"`` (headers and half the body,
            then silence) or ``"reset"`` (the same, then close the socket); for a
            streamed reply, ``"cut"`` (the events, then close the socket without
            ending the body).
        events: A streamed reply's pieces, each sent as one HTTP chunk (``body`` is unused).
        event_delay_s: The pause between two pieces.
    """

    __slots__ = ("action", "body", "event_delay_s", "events", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes,
        headers: tuple[Header, ...] = JSON,
        action: str | None = None,
        events: list[bytes] | None = None,
        event_delay_s: float = 0.0,
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers
        self.action = action
        self.events = events
        self.event_delay_s = event_delay_s


#: ``handler(method, target, body, head)`` answers one request; ``head`` is the raw
#: request head (request line and header lines, CRLF-separated, no final blank line).
Handler = Callable[[bytes, bytes, bytes, bytes], Awaitable[Reply]]


def parse_head(head: bytes) -> tuple[bytes, bytes, int, bool] | None:
    """Parse a plain request head (without the final blank line).

    Args:
        head: Request line and header lines, separated by CRLF.

    Returns:
        ``(method, target, content_length, keep_alive)``, or None when the
        request is not plain and h11 should frame it.
    """
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[2] != b"HTTP/1.1" or not parts[0].isalpha():
        return None
    length, keep, host = -1, True, False
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or b" " in name or b"\t" in name:
            return None
        name = name.lower()
        if name == b"content-length":
            value = value.strip()
            if length >= 0 or not value.isdigit():
                return None
            length = int(value)
        elif name == b"host":
            host = True
        elif name == b"connection":
            keep = b"close" not in value.lower()
        elif name == b"transfer-encoding" or name == b"expect":
            return None
    if not host or length > MAX_BODY:
        return None
    return parts[0], parts[1], max(length, 0), keep


def encode(reply: Reply, keep_alive: bool = True) -> bytes:
    """Return a whole response (status line, headers, body) as one byte string."""
    return encode_head(reply, keep_alive, b"content-length: %d\r\n" % len(reply.body)) + reply.body


def encode_head(reply: Reply, keep_alive: bool, framing: bytes) -> bytes:
    """A response's head: status line, headers, ``framing`` (the body's length header) and the
    blank line."""
    out = [b"HTTP/1.1 %d %s\r\n" % (reply.status, _REASONS.get(reply.status, b""))]
    out.extend(name + b": " + value + b"\r\n" for name, value in reply.headers)
    if not keep_alive:
        out.append(b"connection: close\r\n")
    out.append(framing)
    out.append(b"\r\n")
    return b"".join(out)


def _chunk(piece: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(piece), piece)


async def send_events(stream: trio.SocketStream, reply: Reply, head: bytes,
                      frame: Callable[[bytes], bytes], end: Callable[[], bytes]) -> bool:
    """Send a streamed reply: its head, each piece framed as a chunk after ``reply.event_delay_s``,
    and the body's end; False when the reply was cut (the socket is then closed)."""
    await stream.send_all(head)
    for number, piece in enumerate(reply.events or ()):
        if number and reply.event_delay_s:
            await trio.sleep(reply.event_delay_s)
        await stream.send_all(frame(piece))
    if reply.action == "cut":
        await trio.aclose_forcefully(stream)
        return False
    await stream.send_all(end())
    return True


async def serve_connection(stream: trio.SocketStream, handler: Handler) -> None:
    """Answer requests on one connection until either side closes it.

    Args:
        stream: The accepted connection.
        handler: Answers each request.
    """
    try:
        await _fast_loop(stream, handler)
    except (*_ABORTED, h11.ProtocolError):
        return


async def _fast_loop(stream: trio.SocketStream, handler: Handler) -> None:
    buf = bytearray()
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD:
                return await _h11_loop(stream, handler, bytes(buf))
            data = await stream.receive_some(_RECV)
            if not data:
                return
            buf += data
            continue
        raw_head = bytes(buf[:end])
        head = parse_head(raw_head)
        if head is None:
            return await _h11_loop(stream, handler, bytes(buf))
        method, target, length, keep = head
        stop = end + 4 + length
        while len(buf) < stop:
            data = await stream.receive_some(_RECV)
            if not data:
                return
            buf += data
        body = bytes(buf[end + 4 : stop])
        del buf[:stop]
        reply = await handler(method, target, body, raw_head)
        if reply.events is not None:
            start = encode_head(reply, keep, b"transfer-encoding: chunked\r\n")
            if not await send_events(stream, reply, start, _chunk, lambda: b"0\r\n\r\n") or not keep:
                return
            continue
        if reply.action is not None:
            return await misbehave(stream, reply)
        await stream.send_all(encode(reply, keep))
        if not keep:
            return


async def _h11_loop(stream: trio.SocketStream, handler: Handler, data: bytes) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    conn.receive_data(data)
    while True:
        try:
            got = await _read_request(conn, stream)
        except h11.RemoteProtocolError as exc:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                body = error_body(str(exc) or "bad request", "invalid_request_error")
                await _h11_send(conn, stream, Reply(exc.error_status_hint, body))
            return
        if got is None:
            return
        request, body = got
        reply = await handler(request.method, request.target, body, _raw_head(request))
        if reply.events is not None:
            head = conn.send(h11.Response(status_code=reply.status,
                                          headers=[*reply.headers, (b"transfer-encoding", b"chunked")]))
            if not await send_events(stream, reply, head or b"",
                                     lambda piece: conn.send(h11.Data(data=piece)) or b"",
                                     lambda: conn.send(h11.EndOfMessage()) or b""):
                return
        elif reply.action is not None:
            return await misbehave(stream, reply)
        else:
            await _h11_send(conn, stream, reply)
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return
        conn.start_next_cycle()


def _raw_head(request: h11.Request) -> bytes:
    """Rebuild a request head from h11's parsed request (names are lower-cased)."""
    line = b"%s %s HTTP/%s" % (request.method, request.target, request.http_version)
    return b"\r\n".join([line, *(name + b": " + value for name, value in request.headers)])


async def _read_request(conn: h11.Connection, stream: trio.SocketStream) -> tuple[h11.Request, bytes] | None:
    """Return the next request and its body, or None when the client closed."""
    request: h11.Request | None = None
    chunks: list[bytes] = []
    size = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(_RECV)
            if not data and conn.their_state is h11.IDLE:
                return None
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > MAX_BODY:
                raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage) and request is not None:
            return request, b"".join(chunks)
        else:  # ConnectionClosed or PAUSED
            return None


async def _h11_send(conn: h11.Connection, stream: trio.SocketStream, reply: Reply) -> None:
    headers = [*reply.headers, (b"content-length", b"%d" % len(reply.body))]
    data = conn.send(h11.Response(status_code=reply.status, headers=headers))
    data += conn.send(h11.Data(data=reply.body))
    data += conn.send(h11.EndOfMessage())
    await stream.send_all(data)


async def misbehave(stream: trio.SocketStream, reply: Reply) -> None:
    """Do a connection-level fault (``reply.action``), then end the connection."""
    if reply.action != "hang":
        full = encode(reply)
        await stream.send_all(full[: len(full) - len(reply.body) // 2 - 1])
    if reply.action == "reset":
        await trio.aclose_forcefully(stream)
        return
    await _wait_closed(stream)


async def _wait_closed(stream: trio.SocketStream) -> None:
    """Wait until the peer closes or breaks the connection, ignoring its data."""
    try:
        while await stream.receive_some(_RECV):
            pass
    except _ABORTED:
        return
