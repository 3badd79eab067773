"""The lean transport (issue 12) on real sockets: servers others wrote, and every framing edge.

Two layers:

* :class:`~evalhydra.services.openai.OpenAICompatService` with both
  transports against hypercorn (in this trio loop) serving
  :mod:`tests.asgi_chat`, over HTTP and over HTTPS with a ``trustme`` CA given
  through ``SSL_CERT_FILE``;
* :class:`~evalhydra.http.lean.LeanTransport` alone against hand-written trio
  servers for what hypercorn never sends: close-delimited bodies, interim
  ``100 Continue`` replies, garbled heads, a server that closes a pooled
  connection, one that never reads or never answers (timeouts in virtual time).
"""

from __future__ import annotations

import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
import trustme
from hypercorn.config import Config
from hypercorn.trio import serve

from evalhydra.config.schema import RetryConfig, ServiceConfig
from evalhydra.core.values import ChatRequest, Completion, ErrorKind
from evalhydra.http.lean import DEADLINE, LeanTransport
from evalhydra.services.openai import OpenAICompatService
from tests import asgi_chat

ASK = ChatRequest("Reply with exactly OK.")


# --------------------------------------------------------------------------- hypercorn


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def cert_files(ca: trustme.CA, tmp_path: Path) -> tuple[Path, Path, Path]:
    """(CA bundle, server certificate chain, server key) for 127.0.0.1."""
    server = ca.issue_cert("127.0.0.1", "localhost")
    bundle, chain, key = tmp_path / "ca.pem", tmp_path / "chain.pem", tmp_path / "key.pem"
    ca.cert_pem.write_to_path(str(bundle))
    server.private_key_pem.write_to_path(str(key))
    chain.write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    return bundle, chain, key


@asynccontextmanager
async def hypercorn(tls: tuple[Path, Path] | None = None) -> AsyncIterator[str]:
    """Hypercorn serving the ASGI chat app on a free loopback port; yields its origin."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    config.alpn_protocols = ["http/1.1"]
    if tls:
        config.certfile, config.keyfile = str(tls[0]), str(tls[1])
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: serve(asgi_chat.app, config,  # type: ignore[arg-type]
                                                              shutdown_trigger=stop.wait,
                                                              task_status=task_status))
        try:
            yield binds[0]
        finally:
            stop.set()


def chat_service(base_url: str, tmp_path: Path, transport: str, **cfg: Any) -> OpenAICompatService:
    config = ServiceConfig(name="svc", base_url=base_url, transport=transport, timeout_ms=5000,
                           retry=RetryConfig(max_attempts=1), **cfg)
    return OpenAICompatService(config, registry_root=tmp_path, rng=random.Random(0))


async def ask_once(base_url: str, tmp_path: Path, transport: str, **cfg: Any) -> Completion:
    """One call through a new service on ``transport``, closed afterwards."""
    svc = chat_service(base_url, tmp_path, transport, **cfg)
    try:
        return await svc.complete(ASK)
    finally:
        await svc.aclose()


@pytest.mark.parametrize("transport", ["lean", "httpx"])
@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("framing", ["", "/gzip", "/chunked"])
async def test_each_framing_from_hypercorn_over_http_and_https(
    transport: str, scheme: str, framing: str, cert_files: tuple[Path, Path, Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundle, chain, key = cert_files
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    async with hypercorn((chain, key) if scheme == "https" else None) as origin:
        assert origin.startswith(f"{scheme}://")
        done = await ask_once(f"{origin}{framing}/v1", tmp_path, transport)
    assert done.error_kind is None, done.error_message
    assert (done.output, done.status_code, done.attempt_count) == ("Reply with exactly OK.", 200, 1)


@pytest.mark.parametrize("transport", ["lean", "httpx"])
async def test_an_untrusted_certificate_is_a_connect_error(
    transport: str, cert_files: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, chain, key = cert_files
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    async with hypercorn((chain, key)) as origin:
        done = await ask_once(f"{origin}/v1", tmp_path, transport)
    assert (done.error_kind, done.error_message) == (ErrorKind.CONNECT_ERROR, "ConnectError")
    if transport == "lean":  # httpx's transport raises it with an empty message
        assert "CERTIFICATE_VERIFY_FAILED" in (done.attempts[0].error_message or "")


@pytest.mark.parametrize("transport", ["lean", "httpx"])
@pytest.mark.parametrize("setting", ["ca_bundle", "verify"])
async def test_ca_bundle_and_verify_settings_reach_the_tls_context(
    transport: str, setting: str, cert_files: tuple[Path, Path, Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundle, chain, key = cert_files
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    cfg: dict[str, Any] = {"ca_bundle": str(bundle)} if setting == "ca_bundle" else {"verify": False}
    async with hypercorn((chain, key)) as origin:
        done = await ask_once(f"{origin}/v1", tmp_path, transport, **cfg)
    assert (done.error_kind, done.output) == (None, "Reply with exactly OK."), done.error_message


@pytest.mark.parametrize("transport", [
    "lean",
    # httpcore nests async generators that closing the response does not finalize; trio warns
    # when they are collected. The lean transport's body has none to leave behind.
    pytest.param("httpx",
                 marks=pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")),
])
async def test_an_endless_body_stops_at_the_8_mib_cap(transport: str, tmp_path: Path) -> None:
    async with hypercorn() as origin:
        done = await ask_once(f"{origin}/big/v1", tmp_path, transport)
    assert (done.error_kind, done.error_message) == (ErrorKind.INVALID_RESPONSE, "ResponseTooLarge")


@pytest.mark.parametrize("transport", ["lean", "httpx"])
@pytest.mark.parametrize("framing", ["", "/gzip"])
async def test_a_streamed_answer_from_hypercorn_equals_the_whole_one(transport: str, framing: str,
                                                                     tmp_path: Path) -> None:
    """Hypercorn sends the events as chunks (gzip-flushed after each one under /gzip)."""
    async with hypercorn() as origin:
        whole = await ask_once(f"{origin}{framing}/v1", tmp_path, transport)
        streamed = await ask_once(f"{origin}{framing}/v1", tmp_path, transport, stream=True)
    assert streamed.error_kind is None, streamed.error_message
    assert (streamed.output, streamed.model, streamed.usage) == (whole.output, whole.model, whole.usage)
    assert streamed.ttft_ms is not None and whole.ttft_ms is None


async def test_lean_reuses_its_connection_after_each_stream(tmp_path: Path) -> None:
    """The body's end after ``[DONE]`` is read, so the next stream goes on the same connection."""
    asgi_chat.CONNECTIONS.clear()
    async with hypercorn() as origin:
        svc = chat_service(f"{origin}/v1", tmp_path, "lean", stream=True)
        try:
            outputs = [(await svc.complete(ChatRequest(f"stream {i}"))).output for i in range(10)]
        finally:
            await svc.aclose()
    assert outputs == [f"stream {i}" for i in range(10)]
    assert len(asgi_chat.CONNECTIONS) == 1


async def test_lean_keeps_one_connection_alive_across_calls(tmp_path: Path) -> None:
    asgi_chat.CONNECTIONS.clear()
    async with hypercorn() as origin:
        svc = chat_service(f"{origin}/v1", tmp_path, "lean")
        try:
            outputs = [(await svc.complete(ChatRequest(f"n{i}"))).output for i in range(20)]
        finally:
            await svc.aclose()
    assert outputs == [f"n{i}" for i in range(20)]
    assert len(asgi_chat.CONNECTIONS) == 1


# --------------------------------------------------------------------------- hand-written servers

Handler = Callable[[trio.SocketStream], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A trio TCP server running ``handler`` per connection; yields (origin, accepted count)."""
    accepted = [0]

    async def counted(stream: trio.SocketStream) -> None:
        accepted[0] += 1
        await handler(stream)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, counted, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}", accepted
        nursery.cancel_scope.cancel()


async def read_request(stream: trio.SocketStream) -> bytes:
    """Read one request head and its Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = await stream.receive_some(65536)
        except trio.BrokenResourceError:  # the client reset it (closed with our bytes unread)
            return b""
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += await stream.receive_some(65536)
    return head


def reply(body: bytes, *extra: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), b"".join(extra), body)


async def post(transport: LeanTransport, origin: str, method: str = "POST",
               timeout: httpx.Timeout | None = None, extensions: dict[str, Any] | None = None,
               **kw: Any) -> tuple[httpx.Response, bytes]:
    timeouts = {"timeout": (timeout or httpx.Timeout(10.0)).as_dict()}
    request = httpx.Request(method, f"{origin}/v1/chat/completions",
                            extensions={**timeouts, **(extensions or {})}, **kw)
    response = await transport.handle_async_request(request)
    try:
        return response, await response.aread()
    finally:
        await response.aclose()


async def test_a_close_delimited_body_ends_with_the_stream() -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nhello, ")
        await stream.send_all(b"world")
        await stream.aclose()

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, accepted):
        first = await post(transport, origin, content=b"{}")
        second = await post(transport, origin, content=b"{}")
    await transport.aclose()
    assert first[1] == second[1] == b"hello, world"
    assert accepted[0] == 2  # a close-delimited reply's connection is never reused


async def test_a_pooled_connection_the_server_closed_is_replaced_without_an_attempt(tmp_path: Path) -> None:
    body = asgi_chat.completion("OK")

    async def handler(stream: trio.SocketStream) -> None:  # one reply per connection, then close
        await read_request(stream)
        await stream.send_all(reply(body))
        await trio.sleep(0.05)
        await stream.aclose()

    async with raw_server(handler) as (origin, accepted):
        svc = chat_service(f"{origin}/v1", tmp_path, "lean")
        try:
            first = await svc.complete(ASK)
            await trio.sleep(0.2)  # the server has closed the idle pooled connection by now
            second = await svc.complete(ASK)
        finally:
            await svc.aclose()
    assert (first.output, second.output) == ("OK", "OK")
    assert (first.attempt_count, second.attempt_count) == (1, 1)
    assert accepted[0] == 2


@pytest.mark.parametrize("when", ["with the reply", "after the reply"])
async def test_stray_bytes_after_a_reply_retire_the_connection(when: str, tmp_path: Path) -> None:
    body = asgi_chat.completion("OK")

    async def handler(stream: trio.SocketStream) -> None:
        while await read_request(stream):
            if when == "with the reply":
                await stream.send_all(reply(body) + b"HTTP/1.1 200 OK\r\n")  # a stray start of another
            else:
                await stream.send_all(reply(body))
                await stream.send_all(b"garbage")

    async with raw_server(handler) as (origin, accepted):
        svc = chat_service(f"{origin}/v1", tmp_path, "lean")
        try:
            first = await svc.complete(ASK)
            await trio.sleep(0.05)  # the stray bytes have arrived by now
            second = await svc.complete(ASK)
        finally:
            await svc.aclose()
    assert [(c.output, c.attempt_count) for c in (first, second)] == [("OK", 1), ("OK", 1)]
    assert accepted[0] == 2  # the second call had a connection of its own


async def test_a_server_that_closes_every_new_connection_too_fails_once() -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.aclose()

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, accepted):
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await post(transport, origin, content=b"{}")
    await transport.aclose()
    assert accepted[0] == 1  # a fresh connection is not retried here: retries are the service's


async def test_a_request_with_transfer_encoding_is_sent_chunked() -> None:
    received: list[bytes] = []

    async def handler(stream: trio.SocketStream) -> None:
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            data += await stream.receive_some(65536)
        received.append(data)
        await stream.send_all(reply(b"{}"))

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, _):
        response, _ = await post(transport, origin, content=b"hello",
                                 headers={"Transfer-Encoding": "chunked", "Host": "x"})
    await transport.aclose()
    assert response.status_code == 200
    assert received[0].endswith(b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")


async def test_each_request_carries_its_own_head_and_body() -> None:
    # The transport reuses the head it encoded last when the next request's is the same.
    heads: list[bytes] = []

    async def handler(stream: trio.SocketStream) -> None:
        while head := await read_request(stream):
            heads.append(head)
            await stream.send_all(reply(b"{}"))

    transport = LeanTransport(1)
    async with raw_server(handler) as (origin, _):
        for tag, method in [("a", "POST"), ("a", "POST"), ("b", "POST"), ("a", "PUT"), ("a", "POST")]:
            await post(transport, origin, method, content=tag.encode() * 3, headers={"x-tag": tag})
        await post(transport, origin, content=b"aaaa", headers={"x-tag": "a"})
    await transport.aclose()
    assert [(h.split(b" ", 1)[0], h.split(b"x-tag: ")[1][:1]) for h in heads] == [
        (b"POST", b"a"), (b"POST", b"a"), (b"POST", b"b"), (b"PUT", b"a"), (b"POST", b"a"), (b"POST", b"a")]
    assert b"content-length: 3" in heads[-2].lower() and b"content-length: 4" in heads[-1].lower()


async def test_an_interim_100_continue_is_skipped() -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b'{"ok":1}'))

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, _):
        response, body = await post(transport, origin, content=b"{}")
    await transport.aclose()
    assert (response.status_code, body) == (200, b'{"ok":1}')


async def test_one_connection_parses_each_of_many_replies_afresh() -> None:
    # A connection keeps its reply parser from one exchange to the next.
    replies = [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx-n: 1\r\n\r\n3\r\none\r\n0\r\n\r\n",
               reply(b"two", b"x-n: 2\r\n"),
               b"HTTP/1.1 500 Oops\r\ncontent-length: 5\r\n\r\nthree",
               b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nfour\r\n0\r\n\r\n"]

    async def handler(stream: trio.SocketStream) -> None:
        for wire in replies:
            await read_request(stream)
            await stream.send_all(wire)

    transport = LeanTransport(1)
    async with raw_server(handler) as (origin, accepted):
        got = [await post(transport, origin, content=b"{}") for _ in replies]
    await transport.aclose()
    assert [(r.status_code, r.reason_phrase, body) for r, body in got] == [
        (200, "OK", b"one"), (200, "OK", b"two"), (500, "Oops", b"three"), (200, "OK", b"four")]
    assert [r.headers.get("x-n") for r, _ in got] == ["1", "2", None, None]
    assert accepted == [1]


async def test_head_and_204_replies_have_no_body_and_keep_the_connection() -> None:
    async def handler(stream: trio.SocketStream) -> None:
        head = await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n")  # HEAD: length, no body
        head = await read_request(stream)
        assert head.startswith(b"POST")
        await stream.send_all(b"HTTP/1.1 204 No Content\r\n\r\n")
        await read_request(stream)
        await stream.send_all(reply(b"done"))

    transport = LeanTransport(1)
    async with raw_server(handler) as (origin, accepted):
        head = await post(transport, origin, method="HEAD")
        empty = await post(transport, origin, content=b"{}")
        done = await post(transport, origin, content=b"{}")
    await transport.aclose()
    assert [(r.status_code, b) for r, b in (head, empty, done)] == [(200, b""), (204, b""), (200, b"done")]
    assert accepted[0] == 1


@pytest.mark.parametrize(("wire", "message"), [
    (b"HTCPCP/1.0 418 teapot\r\n\r\n", "malformed reply"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten b", "complete message body"),
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "malformed reply"),
])
async def test_a_garbled_or_cut_reply_is_a_remote_protocol_error(wire: bytes, message: str) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(wire)
        await stream.aclose()

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, _):
        with pytest.raises(httpx.RemoteProtocolError, match=message):
            await post(transport, origin, content=b"{}")
    await transport.aclose()


async def test_gzip_is_decoded_by_httpx_response() -> None:
    import gzip

    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(reply(gzip.compress(b"inflated"), b"content-encoding: gzip\r\n"))

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, _):
        _, body = await post(transport, origin, content=b"{}")
    await transport.aclose()
    assert body == b"inflated"


async def test_read_timeout_in_virtual_time(autojump_clock: trio.testing.MockClock) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await trio.sleep_forever()

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, _):
        start = trio.current_time()
        with pytest.raises(httpx.ReadTimeout):
            await post(transport, origin, content=b"{}", timeout=httpx.Timeout(10.0, read=5.0))
        assert trio.current_time() - start == pytest.approx(5.0)
    await transport.aclose()


async def drip(stream: trio.SocketStream) -> None:
    """Answer with a head promising 100 bytes, then send one byte a second."""
    await read_request(stream)
    await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
    for _ in range(100):
        await trio.sleep(1.0)
        await stream.send_all(b"x")


async def test_the_deadline_extension_ends_a_dripping_reply(autojump_clock: trio.testing.MockClock) -> None:
    transport = LeanTransport(4)
    async with raw_server(drip) as (origin, accepted):
        start = trio.current_time()
        with pytest.raises(trio.TooSlowError):  # every read is in time (10 s); the whole exchange is not
            await post(transport, origin, content=b"{}", extensions={DEADLINE: start + 4.5})
        assert trio.current_time() - start == pytest.approx(4.5)
        with pytest.raises(trio.TooSlowError):  # the timed-out connection is not reused
            await post(transport, origin, content=b"{}", extensions={DEADLINE: trio.current_time() + 0.5})
        assert accepted[0] == 2
    await transport.aclose()


async def test_a_lean_attempt_ends_at_its_timeout_however_the_reply_drips(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with raw_server(drip) as (origin, _):
        start = trio.current_time()
        done = await ask_once(origin, tmp_path, "lean")
    assert (done.error_kind, done.error_message, done.status_code) == (ErrorKind.TIMEOUT, "Timeout", None)
    assert trio.current_time() - start == pytest.approx(5.0)  # the service's timeout_ms, not 100 reads


async def test_write_timeout_when_the_server_never_reads(autojump_clock: trio.testing.MockClock) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, _):
        with pytest.raises(httpx.WriteTimeout):
            await post(transport, origin, content=b"x" * (64 << 20), timeout=httpx.Timeout(10.0, write=2.0))
    await transport.aclose()


async def test_pool_timeout_when_every_connection_is_busy(autojump_clock: trio.testing.MockClock) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await trio.sleep_forever()

    transport = LeanTransport(1)
    async with raw_server(handler) as (origin, _), trio.open_nursery() as nursery:
        nursery.start_soon(lambda: post(transport, origin, content=b"{}"))
        await trio.sleep(1)
        with pytest.raises(httpx.PoolTimeout):
            await post(transport, origin, content=b"{}", timeout=httpx.Timeout(10.0, pool=3.0))
        nursery.cancel_scope.cancel()
    await transport.aclose()


async def test_refused_unsupported_and_unsendable_requests() -> None:
    transport = LeanTransport(4)
    with socket_closed_port() as port, pytest.raises(httpx.ConnectError):
        await post(transport, f"http://127.0.0.1:{port}", content=b"{}")
    with pytest.raises(httpx.UnsupportedProtocol):
        await transport.handle_async_request(httpx.Request("GET", "ftp://127.0.0.1/x"))
    with pytest.raises(httpx.LocalProtocolError, match="line break"):
        await post(transport, "http://127.0.0.1:9", content=b"{}", headers={"x-bad": "a\r\nInjected: 1"})
    await transport.aclose()
    with pytest.raises(httpx.ConnectError, match="closed"):
        await post(transport, "http://127.0.0.1:9", content=b"{}")


class socket_closed_port:  # noqa: N801 - a context manager used like a function
    """A loopback port with nothing listening (bound, then closed)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    def __exit__(self, *_: object) -> None:
        return None


async def test_a_streamed_reply_frees_its_connection_when_read_or_closed() -> None:
    async def handler(stream: trio.SocketStream) -> None:
        while await read_request(stream):
            await stream.send_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
            await trio.sleep(0.01)
            await stream.send_all(b"0\r\n\r\n")

    transport = LeanTransport(1)
    async with raw_server(handler) as (origin, accepted):
        _, body = await post(transport, origin, content=b"{}")
        request = httpx.Request("POST", f"{origin}/v1/chat/completions", content=b"{}")
        response = await transport.handle_async_request(request)
        await response.aclose()  # closed before the body ended: the connection is dropped
        _, again = await post(transport, origin, content=b"{}")
    await transport.aclose()
    assert body == again == b"hello"
    assert accepted[0] == 2


def test_the_tls_context_is_httpx_s_and_honours_ssl_cert_file(
    cert_files: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, _, _ = cert_files
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    context = LeanTransport(1)._tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert any("trustme" in str(cert["subject"]) for cert in context.get_ca_certs())
