"""Reading a reply's body with a cap on what it decodes to (the role of httpx's ``_decoders.py``).

A service reads every reply through :func:`read_capped` and gives it back with
:func:`aclose_response`, whichever transport answered: the lean transport's whole
bodies are taken as they are, any other stream is read chunk by chunk, and a
gzip or deflate body is inflated here with the cap applied to its decoded size.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from contextlib import aclosing

import httpx

from evalhydra.http.lean import CompleteBody

__all__ = ["BodyTooLarge", "aclose_response", "aiter_capped", "read_capped"]


class BodyTooLarge(Exception):
    """A streamed body decoded to more than its cap."""


async def aclose_response(response: httpx.Response) -> None:
    """Close a response after its body was read (a body read whole has nothing to close)."""
    if type(response.stream) is not CompleteBody:
        await response.aclose()


async def read_capped(response: httpx.Response, cap: int) -> bytes | None:
    """Read the body, stopping past ``cap`` decoded bytes; None when it is larger.

    The cap counts what the body decodes to: a gzip or deflate body is inflated here,
    at most ``cap + 1`` bytes of it, so a small compressed reply cannot expand past
    the cap in memory (``Content-Length`` is the compressed size). A body without a
    ``Content-Encoding`` is read from the response's raw stream: httpx's decoding
    layers would only copy it.
    """
    encoding = _content_encoding(response.headers.raw)
    stream = response.stream
    if type(stream) is CompleteBody and encoding in _IDENTITY and not response.is_stream_consumed:
        body = stream.chunks[0] if len(stream.chunks) == 1 else b"".join(stream.chunks)
        return body if len(body) <= cap else None  # the lean transport read it whole with its head
    # A response built in memory (already read) is already decoded; the paths below count it.
    raw = not response.is_stream_consumed and isinstance(stream, httpx.AsyncByteStream)
    if raw and encoding in _INFLATE_WBITS:
        return await _inflate_capped(response, cap, encoding)
    length = response.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > cap:
        return None
    plain = raw and encoding in _IDENTITY
    source = aiter(response.stream) if plain else response.aiter_bytes()  # type: ignore[arg-type]
    parts: list[bytes] = []
    size = 0
    async with aclosing(source) as chunks:  # type: ignore[type-var]
        async for chunk in chunks:
            parts.append(chunk)
            size += len(chunk)
            if size > cap:
                return None
    return parts[0] if len(parts) == 1 else b"".join(parts)


_IDENTITY = ("", "identity")


def _content_encoding(headers: list[tuple[bytes, bytes]]) -> str:
    """The reply's ``Content-Encoding``, lower-cased (repeated headers joined with ``", "``, as
    ``httpx.Headers.get`` joins them); one pass over the raw headers."""
    values = [value for name, value in headers if name.lower() == b"content-encoding"]
    if not values:
        return ""
    return b", ".join(values).decode("latin-1").strip().lower()


#: zlib window bits per Content-Encoding (gzip header, or the zlib wrapper of deflate).
_INFLATE_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


async def _inflate_capped(response: httpx.Response, cap: int, encoding: str) -> bytes | None:
    """Inflate a gzip/deflate body from its raw bytes, never holding more than ``cap + 1`` of it."""
    out = bytearray()
    try:
        async for part in _inflated(response, encoding, cap):
            out += part
    except BodyTooLarge:
        return None
    return bytes(out)


#: Decoded bytes a compressed body may reach before :func:`aiter_capped`'s ``max_ratio`` applies.
RATIO_FLOOR = 1 << 20


async def _inflated(response: httpx.Response, encoding: str, cap: int,
                    max_ratio: float | None = None) -> AsyncIterator[bytes]:
    """The decoded chunks of a gzip/deflate body; :class:`BodyTooLarge` past ``cap`` decoded bytes
    or, past :data:`RATIO_FLOOR`, ``max_ratio`` times the bytes received."""
    inflater = zlib.decompressobj(_INFLATE_WBITS[encoding])
    size = received = 0
    first = True
    try:
        async with aclosing(aiter(response.stream)) as chunks:  # type: ignore[arg-type,type-var]
            async for chunk in chunks:
                if first and encoding == "deflate" and chunk[:1] not in (b"x", b"X"):
                    inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as httpx accepts
                first = False
                received += len(chunk)
                data = chunk
                while data:
                    part = inflater.decompress(data, cap + 1 - size)
                    size += len(part)
                    if size > cap:
                        raise BodyTooLarge(f"it decodes to more than {cap} bytes")
                    if max_ratio is not None and size > RATIO_FLOOR and size > max_ratio * received:
                        raise BodyTooLarge(f"it inflates to more than {max_ratio:g} times its "
                                           f"{encoding} size")
                    if part:
                        yield part
                    data = inflater.unconsumed_tail
    except zlib.error as exc:
        raise httpx.DecodingError(f"invalid {encoding} body: {exc}", request=response.request) from None


async def aiter_capped(response: httpx.Response, cap: int, *,
                       max_ratio: float | None = None) -> AsyncIterator[bytes]:
    """The body's decoded chunks as they arrive (a streamed reply), at most ``cap`` bytes of them.

    A gzip or deflate body is inflated here, the cap applied to its decoded size, as
    :func:`read_capped` does for a whole body.

    Args:
        response: A response whose body is not read yet.
        cap: Most decoded bytes.
        max_ratio: Most decoded bytes per byte received, once past :data:`RATIO_FLOOR` (a
            compressed body; None: no such bound).

    Raises:
        BodyTooLarge: Once the decoded body passes ``cap`` bytes (or ``max_ratio``).
        httpx.DecodingError: A compressed body that does not inflate.
    """
    encoding = _content_encoding(response.headers.raw)
    if encoding in _INFLATE_WBITS:
        async with aclosing(_inflated(response, encoding, cap, max_ratio)) as parts:  # type: ignore[type-var]
            async for part in parts:
                yield part
        return
    size = 0
    async with aclosing(aiter(response.stream)) as chunks:  # type: ignore[arg-type,type-var]
        async for chunk in chunks:
            size += len(chunk)
            if size > cap:
                raise BodyTooLarge(f"it is longer than {cap} bytes")
            yield chunk
