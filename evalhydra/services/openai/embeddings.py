"""The embeddings endpoint (OpenAI's ``/v1/embeddings``), for graders that compare texts by meaning.

A few calls per case at most (``text_similarity`` with ``cosine``), so they go
through a plain ``httpx.AsyncClient`` (trio through anyio), one attempt each; a
failure comes back as a :class:`~evalhydra.core.values.Completion` with its
error, never as an exception.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping

import httpx

from evalhydra.core.values import Completion, ErrorKind, Usage
from evalhydra.services.openai.response import upstream_error_message
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
            response = await client.post(f"{base}/embeddings", json={"model": model, "input": texts})
        except httpx.HTTPError as exc:
            return None, _failed(model, ErrorKind.CONNECT_ERROR, mask(f"{type(exc).__name__}: {exc}"),
                                 None, started)
    if response.status_code != 200:
        return None, _failed(model, classify_status(response.status_code),
                             mask(upstream_error_message(response.content)), response.status_code, started)
    vectors = _vectors(response.content, len(texts))
    if vectors is None:
        return None, _failed(model, ErrorKind.INVALID_RESPONSE, "InvalidEmbeddingsResponse", 200, started)
    usage = (json.loads(response.content).get("usage") or {})
    record = Completion(output="", model=model, status_code=200,
                        usage=Usage(prompt_tokens=int(usage.get("prompt_tokens") or 0)),
                        latency_ms=(time.perf_counter() - started) * 1000.0)
    return vectors, record


def _vectors(body: bytes, count: int) -> list[list[float]] | None:
    """The ``data[].embedding`` lists of a reply, in ``index`` order; None unless there are ``count``."""
    try:
        data = json.loads(body)["data"]
        ordered = sorted(data, key=lambda d: d["index"])
        vectors = [[float(x) for x in d["embedding"]] for d in ordered]
    except (ValueError, KeyError, TypeError):
        return None
    return vectors if len(vectors) == count and all(vectors) else None


def _failed(model: str, kind: ErrorKind, message: str, status: int | None, started: float) -> Completion:
    return Completion(output="", model=model, status_code=status, error_kind=kind, error_message=message,
                      latency_ms=(time.perf_counter() - started) * 1000.0)
