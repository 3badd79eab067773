"""The provider's Files and Batches API (OpenAI's ``/v1/files`` and ``/v1/batches``), on httpx.

A few calls per batch, so they go through a plain ``httpx.AsyncClient`` (trio
through anyio) rather than the chat path's tuned transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from evalhydra.services.openai.payload import api_base
from evalhydra.services.openai.response import upstream_error_message

__all__ = ["BatchApi", "BatchApiError", "api_base"]


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

    async def create(self, input_file_id: str, completion_window: str,
                     metadata: dict[str, str]) -> dict[str, Any]:
        """Create a batch of chat completions from an uploaded file."""
        return await self._call("POST", "batches", json={
            "input_file_id": input_file_id, "endpoint": "/v1/chat/completions",
            "completion_window": completion_window, "metadata": metadata})

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        """A batch as the provider has it now."""
        return await self._call("GET", f"batches/{batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        """Ask the provider to cancel a batch."""
        return await self._call("POST", f"batches/{batch_id}/cancel")

    async def find(self, metadata_key: str, value: str, *, pages: int = 20) -> dict[str, Any] | None:
        """The newest batch whose ``metadata[metadata_key]`` is ``value`` (a batch created just
        before a crash), looking through at most ``pages`` pages of 100."""
        after: str | None = None
        for _ in range(pages):
            params = {"limit": "100", **({"after": after} if after else {})}
            page = await self._call("GET", "batches", params=params)
            for batch in page.get("data") or []:
                if (batch.get("metadata") or {}).get(metadata_key) == value:
                    return dict(batch)
            if not page.get("has_more") or not page.get("last_id"):
                return None
            after = str(page["last_id"])
        return None

    async def content(self, file_id: str) -> bytes:
        """A file's content (a batch's output or error file)."""
        response = await self._send("GET", f"files/{file_id}/content")
        return response.content

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
