"""The provider's Files and Batches API (OpenAI's ``/v1/files`` and ``/v1/batches``), on httpx.

A few calls per batch, so they go through a plain ``httpx.AsyncClient`` (trio
through anyio) rather than the chat path's tuned transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from evalhydra.http.body import BodyTooLarge, aiter_capped, read_capped
from evalhydra.services.batch.lines import MAX_INFLATE_RATIO, MAX_LINE_BYTES, BatchLines
from evalhydra.services.openai.payload import api_base
from evalhydra.services.openai.response import upstream_error_message

__all__ = ["BatchApi", "BatchApiError", "MalformedBatch", "api_base", "checked_batch"]

#: Most bytes read of a refused call's body (for its message).
_ERROR_BODY_BYTES = 64 << 10


class BatchApiError(Exception):
    """A files or batches call that failed: ``status`` (None: no answer) and the provider's message."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def gone(self) -> bool:
        """The provider does not know the object (404)."""
        return self.status == 404

    @property
    def transient(self) -> bool:
        """Worth trying again: no answer, 408, 409, 429 or a 5xx."""
        return self.status is None or self.status in (408, 409, 429) or self.status >= 500


class MalformedBatch(BatchApiError):  # noqa: N818 (a BatchApiError like the others)
    """The provider answered with an object that is no batch (no ``id``, a ``status`` that is no
    string …): not worth asking again, not gone."""

    def __init__(self, message: str) -> None:
        super().__init__(200, message)


def checked_batch(found: dict[str, Any], where: str) -> dict[str, Any]:
    """A batch object from the provider, its fields of the types a batch's have.

    ``request_counts`` that are not an object of integers are dropped (they are only shown);
    ``errors`` that are not an object are dropped.

    Raises:
        MalformedBatch: No string ``id`` or ``status``, or a file id that is no string.
    """
    if not isinstance(found.get("id"), str) or not found["id"]:
        raise MalformedBatch(f"{where}: the provider's batch has no id")
    if not isinstance(found.get("status"), str):
        raise MalformedBatch(f"{where}: the provider's batch {found['id']} has no status string")
    for name in ("input_file_id", "output_file_id", "error_file_id"):
        if found.get(name) is not None and not isinstance(found[name], str):
            raise MalformedBatch(f"{where}: the provider's batch {found['id']} has a {name} "
                                 "that is no string")
    batch = dict(found)
    counts = batch.get("request_counts")
    batch["request_counts"] = {k: v for k, v in counts.items() if type(v) is int and 0 <= v < 1 << 62} \
        if isinstance(counts, dict) else {}
    if not isinstance(batch.get("errors"), dict):
        batch["errors"] = None
    return batch


class BatchApi:
    """Files and batches calls against one API root.

    Args:
        base: The API root (:func:`api_base`).
        headers: Sent with every call (the key, read when the API is opened).
        transport: An httpx transport (tests); httpx's own by default.
        timeout_s: Each call's timeout (an upload of a large file may take a while).
    """

    def __init__(self, base: str, headers: Mapping[str, str], *,
                 transport: httpx.AsyncBaseTransport | None = None, timeout_s: float = 300.0) -> None:
        self.base = base
        self._client = httpx.AsyncClient(base_url=base + "/", headers=dict(headers), transport=transport,
                                         timeout=timeout_s)

    async def upload(self, content: bytes, filename: str) -> str:
        """Upload a batch input file; return its id."""
        files = {"file": (filename, content, "application/jsonl")}
        found = await self._call("POST", "files", data={"purpose": "batch"}, files=files)
        return str(found["id"])

    async def create(self, input_file_id: str, completion_window: str, endpoint: str,
                     metadata: dict[str, str]) -> dict[str, Any]:
        """Create a batch of requests to ``endpoint`` (``/v1/chat/completions``, ``/v1/responses``)
        from an uploaded file."""
        found = await self._call("POST", "batches", json={
            "input_file_id": input_file_id, "endpoint": endpoint,
            "completion_window": completion_window, "metadata": metadata})
        return checked_batch(found, "POST /batches")

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        """A batch as the provider has it now."""
        return checked_batch(await self._call("GET", f"batches/{batch_id}"), f"GET /batches/{batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        """Ask the provider to cancel a batch."""
        return checked_batch(await self._call("POST", f"batches/{batch_id}/cancel"),
                             f"POST /batches/{batch_id}/cancel")

    async def find(self, metadata_key: str, value: str, *, pages: int = 20) -> dict[str, Any] | None:
        """The newest batch whose ``metadata[metadata_key]`` is ``value`` (a batch created just
        before a crash), looking through at most ``pages`` pages of 100."""
        after: str | None = None
        for _ in range(pages):
            params = {"limit": "100", **({"after": after} if after else {})}
            page = await self._call("GET", "batches", params=params)
            data = page.get("data")
            for batch in data if isinstance(data, list) else []:
                metadata = batch.get("metadata") if isinstance(batch, dict) else None
                if isinstance(metadata, dict) and metadata.get(metadata_key) == value:
                    return checked_batch(batch, "GET /batches")
            if page.get("has_more") is not True or not isinstance(page.get("last_id"), str):
                return None
            after = str(page["last_id"])
        return None

    async def read_file(self, file_id: str, lines: BatchLines) -> None:
        """Read a batch's output or error file into ``lines`` as it downloads, within the caps of
        :mod:`evalhydra.services.batch.lines` (a file past them is refused from there on)."""
        path = f"files/{file_id}/content"
        try:
            async with self._client.stream("GET", path) as response:
                if response.status_code >= 300:
                    message = upstream_error_message(await read_capped(response, _ERROR_BODY_BYTES) or b"")
                    status = response.status_code
                    raise BatchApiError(status, f"GET /{path}: {status} {message}")
                await _split_lines(response, lines)
        except httpx.DecodingError as exc:
            lines.refuse(str(exc))
        except httpx.HTTPError as exc:
            raise BatchApiError(None, f"GET /{path}: {type(exc).__name__}: {exc}") from None

    async def delete(self, file_id: str) -> None:
        """Delete a file at the provider (one already gone is fine)."""
        try:
            await self._call("DELETE", f"files/{file_id}")
        except BatchApiError as exc:
            if not exc.gone:
                raise

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._send(method, path, **kwargs)
        try:
            found = response.json()
        except ValueError:
            raise BatchApiError(response.status_code, f"{method} /{path}: the reply is not JSON") from None
        except RecursionError:  # a reply nested deeper than any batch object is
            raise BatchApiError(response.status_code, f"{method} /{path}: the reply is JSON nested too"
                                " deep to be a batch object") from None
        if not isinstance(found, dict):
            raise BatchApiError(response.status_code, f"{method} /{path}: the reply is not a JSON object")
        return found

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise BatchApiError(None, f"{method} /{path}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 300:
            message = upstream_error_message(response.content)
            raise BatchApiError(response.status_code, f"{method} /{path}: {response.status_code} {message}")
        return response


async def _split_lines(response: httpx.Response, lines: BatchLines) -> None:
    """Feed the body's lines to ``lines``; a line past :data:`MAX_LINE_BYTES` is skipped to its end."""
    pending = bytearray()
    skipping = False
    try:
        async for chunk in aiter_capped(response, lines.max_bytes, max_ratio=MAX_INFLATE_RATIO):
            pending += chunk
            start = 0
            while (end := pending.find(b"\n", start)) >= 0:
                if not skipping:
                    lines.feed(bytes(pending[start:end]))
                skipping = False
                start = end + 1
            del pending[:start]
            if len(pending) > MAX_LINE_BYTES:
                if not skipping:
                    lines.too_long(bytes(pending[:4096]))
                skipping = True
                pending.clear()
            if lines.refused:
                return
    except BodyTooLarge as exc:
        lines.refuse(str(exc))
        return
    if pending and not skipping:
        lines.feed(bytes(pending))
