"""A flooding endpoint costs one request, not the run (issue 33, item 2).

Hand-written trio servers on loopback send what no server should: endless
headers, an endless header value, an endless stream of ``100 Continue``. The
lean transport stops each at its caps, quickly and in bounded memory, and
healthy requests beside it are not held up.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

import httpx
import pytest
import trio

from evalhydra.http.lean import MAX_HEAD_BYTES, LeanTransport
from tests.http.test_lean_transport import post, raw_server, read_request, reply

Flood = Callable[[trio.SocketStream], object]


async def _endless(stream: trio.SocketStream, first: bytes, unit: bytes) -> None:
    await read_request(stream)
    try:
        await stream.send_all(first)
        while True:
            await stream.send_all(unit * 512)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


FLOODS: dict[str, tuple[bytes, bytes, str]] = {
    "headers": (b"HTTP/1.1 200 OK\r\n", b"x-flood: yes\r\n", "over 256 headers"),
    "header value": (b"HTTP/1.1 200 OK\r\nx-flood: ", b"a" * 64, "head is over"),
    "interim replies": (b"", b"HTTP/1.1 100 Continue\r\n\r\n", "interim"),
}


@pytest.mark.parametrize("flood", sorted(FLOODS))
async def test_a_flooding_head_is_refused_at_its_cap(flood: str) -> None:
    first, unit, message = FLOODS[flood]
    transport = LeanTransport(4)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    async with raw_server(lambda stream: _endless(stream, first, unit)) as (origin, _):
        start = time.monotonic()
        with pytest.raises(httpx.RemoteProtocolError, match=message):
            await post(transport, origin, content=b"{}")
        assert time.monotonic() - start < 2.0
    await transport.aclose()
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert grown_kib < 50 * 1024  # the reply's head is capped at 64 KiB, not read to the end


async def test_a_head_just_under_the_cap_is_read() -> None:
    headers = [b"x-h%d: %s\r\n" % (i, b"v" * 200) for i in range((MAX_HEAD_BYTES - 2048) // 210)]

    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(reply(b"{}", *headers))

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, _):
        response, body = await post(transport, origin, content=b"{}")
    await transport.aclose()
    assert response.status_code == 200 and body == b"{}"


async def test_healthy_requests_are_not_held_up_by_a_flood_beside_them() -> None:
    async def healthy(stream: trio.SocketStream) -> None:
        while await read_request(stream):
            await stream.send_all(reply(b'{"ok": true}'))

    transport = LeanTransport(32)
    done: list[float] = []
    async with raw_server(healthy) as (good, _), \
            raw_server(lambda stream: _endless(stream, b"HTTP/1.1 200 OK\r\nx-a: ", b"b" * 64)) as (bad, _):
        start = time.monotonic()

        async def one_healthy() -> None:
            await post(transport, good, content=b"{}")
            done.append(time.monotonic() - start)

        async def one_flood() -> None:
            with pytest.raises(httpx.RemoteProtocolError):
                await post(transport, bad, content=b"{}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one_flood)
            for _ in range(20):
                nursery.start_soon(one_healthy)
    await transport.aclose()
    assert len(done) == 20 and max(done) < 1.0


async def test_a_body_arriving_past_the_deadline_ends_there_even_with_bytes_always_ready() -> None:
    """A body streamed without pause: each read returns at once, so only the per-read check ends it."""

    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        try:
            await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100000000000\r\n\r\n")
            while True:
                await stream.send_all(b"x" * 65536)
                await trio.sleep(0.001)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    transport = LeanTransport(4)
    async with raw_server(handler) as (origin, _):
        start = trio.current_time()
        with pytest.raises(trio.TooSlowError):
            await post(transport, origin, content=b"{}", extensions={"evalhydra.deadline": start + 0.5})
        assert trio.current_time() - start < 1.5
    await transport.aclose()
