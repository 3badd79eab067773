"""The embeddings endpoint (OpenAI's ``/v1/embeddings``), for graders that compare texts by meaning.

A few calls per case at most (``text_similarity`` with ``cosine``), so they go
through a plain ``httpx.AsyncClient`` (trio through anyio), one attempt each; a
failure comes back as a :class:`~evalhydra.core.values.Completion` with its
error, never as an exception.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from evalhydra.core.strictjson import loads_plain
from evalhydra.core.values import Completion, ErrorKind, Usage
from evalhydra.http.body import read_capped
from evalhydra.services.openai.response import InvalidResponseError, parse_usage, upstream_error_message
from evalhydra.services.retry import classify_status

__all__ = ["request_embeddings"]


async def request_embeddings(base: str, headers: Mapping[str, str], model: str, texts: list[str], *,
                             timeout_s: float, mask: Callable[[str], str],
                             transport: httpx.AsyncBaseTransport | None = None,
                             ) -> tuple[list[list[float]] | None, Completion]:
    """POST ``texts`` to ``{base}/embeddings``: their vectors, in order, and the call's record.

    Args:
        base: The API root (``…/v1``).
        headers: Sent with the call (the key, read now).
        model: The embedding model.
        texts: What to embed.
        timeout_s: The call's timeout.
        mask: Hides the service's secrets in an error message.
        transport: An httpx transport (tests); httpx's own by default.
    """
    started = time.perf_counter()
    async with httpx.AsyncClient(headers=dict(headers), transport=transport, timeout=timeout_s) as client:
        try:
            async with client.stream("POST", f"{base}/embeddings",
                                     json={"model": model, "input": texts}) as response:
                status, body = response.status_code, await read_capped(response, MAX_EMBEDDINGS_BYTES)
        except httpx.HTTPError as exc:
            return None, _failed(model, ErrorKind.CONNECT_ERROR, mask(f"{type(exc).__name__}: {exc}"),
                                 None, started)
    if status != 200:
        return None, _failed(model, classify_status(status), mask(upstream_error_message(body or b"")),
                             status, started)
    reply = _reply(body)
    vectors = _vectors(reply, len(texts))
    if vectors is None:
        return None, _failed(model, ErrorKind.INVALID_RESPONSE, "InvalidEmbeddingsResponse", 200, started)
    try:
        usage = parse_usage(reply)  # a dict: _vectors read it
    except InvalidResponseError as exc:
        return None, _failed(model, ErrorKind.INVALID_RESPONSE, str(exc.args[0]), 200, started)
    record = Completion(output="", model=model, status_code=200,
                        usage=Usage(prompt_tokens=usage.prompt_tokens),
                        latency_ms=(time.perf_counter() - started) * 1000.0)
    return vectors, record


#: The largest embeddings reply read (a few texts' vectors are far smaller).
MAX_EMBEDDINGS_BYTES = 64 << 20


def _reply(body: bytes | None) -> Any:
    """The reply's JSON (None when it is too large, too deep or no JSON)."""
    if body is None:
        return None
    try:
        return loads_plain(body, constants=False)
    except ValueError:
        return None


def _vectors(reply: Any, count: int) -> list[list[float]] | None:
    """The ``data[].embedding`` lists of a reply, in ``index`` order; None unless there are ``count``
    of them, each of finite numbers."""
    try:
        data = reply["data"]
        ordered = sorted(data, key=lambda d: d["index"])
        vectors = [[float(x) for x in d["embedding"]] for d in ordered]
    except (ValueError, KeyError, TypeError, OverflowError):
        return None
    if not all(math.isfinite(x) for vector in vectors for x in vector):
        return None
    return vectors if len(vectors) == count and all(vectors) else None


def _failed(model: str, kind: ErrorKind, message: str, status: int | None, started: float) -> Completion:
    return Completion(output="", model=model, status_code=status, error_kind=kind, error_message=message,
                      latency_ms=(time.perf_counter() - started) * 1000.0)
