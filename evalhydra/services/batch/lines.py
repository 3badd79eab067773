"""A batch's output and error files, read as untrusted input.

A provider's file is read line by line as it downloads (:meth:`BatchApi.read_file`),
within the caps a chat reply has: each line at most :data:`MAX_LINE_BYTES`, the
file's decoded size bounded by the lines asked for, a compressed file at most
:data:`MAX_INFLATE_RATIO` times its size. :class:`BatchLines` keeps, for each
request the batch was asked, one checked line in a small fixed shape: an answer
(status 200 and a JSON object body) or an error message, every string masked.
What it cannot use it says why, per request: a line too deep or not JSON, longer
than a reply may be, a request answered twice (ambiguous: neither line is
scored), or a file refused whole. Only these checked lines reach the store's
``batches`` ledger, so no rerun replays a poisoned line; a ledger written before
lines were checked is read through the same class.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from evalhydra.core.strictjson import loads_plain
from evalhydra.services.openai.service import MAX_RESPONSE_BYTES

__all__ = ["MAX_INFLATE_RATIO", "MAX_LINE_BYTES", "BatchLines", "line_error"]

#: Longest line of a batch file: a reply's cap and room for the line's own fields.
MAX_LINE_BYTES = MAX_RESPONSE_BYTES + (64 << 10)
#: Most decoded bytes per byte downloaded of a compressed file (JSON lines compress far less).
MAX_INFLATE_RATIO = 100.0
#: Lines a file may hold beyond those asked for before the rest are not read.
EXTRA_LINES = 1000
#: Longest provider message kept for a failed line.
MAX_MESSAGE_CHARS = 2000
#: A line's ``custom_id`` as a provider writes it near the start (found without parsing the line).
_CLAIMED_ID = re.compile(rb'"custom_id"\s*:\s*"([^"\\]{1,512})"')


class BatchLines:
    """The checked lines of one batch file, by ``custom_id``.

    A checked line is ``{"status_code": 200, "body": {...}}`` (an answer) or
    ``{"status_code": int | None, "message": str}`` (why the request has none); the
    ledger keeps each as ``{"custom_id": …, "checked": {…}}``.

    Args:
        asked: The batch's ``custom_id`` values: lines naming others are dropped.
        mask: Takes the run's secrets out of a string.
        name: The file as messages name it (``output`` or ``error``).
    """

    def __init__(self, asked: Iterable[str], mask: Callable[[str], str] = lambda text: text, *,
                 name: str = "output") -> None:
        self.asked = frozenset(asked)
        self.name = name
        self._mask = mask
        self._lines: dict[str, dict[str, Any]] = {}
        self._seen: dict[str, int] = {}
        self._read = 0
        self.refused: str | None = None  # why the rest of the file was not read

    @property
    def max_bytes(self) -> int:
        """Most decoded bytes the file may have."""
        return (len(self.asked) + EXTRA_LINES) * MAX_LINE_BYTES

    @classmethod
    def of_text(cls, text: str, asked: Iterable[str], mask: Callable[[str], str] = lambda t: t, *,
                name: str = "output") -> BatchLines:
        """The checked lines of a file's whole text (one the ledger kept)."""
        lines = cls(asked, mask, name=name)
        for raw in text.encode("utf-8", "surrogatepass").splitlines():
            if len(raw) > MAX_LINE_BYTES:
                lines.too_long(raw[:4096])
            else:
                lines.feed(raw)
        return lines

    def feed(self, raw: bytes) -> None:
        """Take one line of the file (without its newline)."""
        if not raw.strip() or self.refused:
            return
        self._read += 1
        if self._read > len(self.asked) + EXTRA_LINES:
            self.refused = f"it has more than {len(self.asked) + EXTRA_LINES} lines"
            return
        try:
            line = loads_plain(raw, constants=False)
        except (ValueError, RecursionError) as exc:
            self._claim(raw, _error_line(None, f"the provider's line is unreadable: {exc}"))
            return
        custom_id = line.get("custom_id") if isinstance(line, dict) else None
        if isinstance(custom_id, str):
            self._keep(custom_id, self._checked(line))

    def too_long(self, head: bytes) -> None:
        """A line longer than :data:`MAX_LINE_BYTES` (``head``: its start)."""
        self._read += 1
        reason = f"the provider's line is longer than the {MAX_LINE_BYTES} bytes any reply may be"
        self._claim(head, _error_line(None, reason))

    def refuse(self, reason: str) -> None:
        """The file was not read to its end (``reason``: why)."""
        self.refused = self.refused or reason

    def own(self, custom_id: str) -> dict[str, Any] | None:
        """The checked line the file has for ``custom_id``, or an ambiguous-line error when it
        answered the request more than once."""
        count = self._seen.get(custom_id, 0)
        if count > 1:
            return _error_line(None, f"the batch's {self.name} file has {count} lines for this request: "
                                     "neither is scored")
        return self._lines.get(custom_id)

    def get(self, custom_id: str) -> dict[str, Any] | None:
        """:meth:`own`, or why there is none when the file was not read to its end."""
        found = self.own(custom_id)
        if found is None and self.refused:
            return _error_line(None, f"the batch's {self.name} file was not read: {self.refused}")
        return found

    def text(self) -> str:
        """The checked lines as JSONL, as the ledger keeps them (the file's own order)."""
        ids = list(self._seen)
        if self.refused:
            ids += sorted(self.asked.difference(self._seen))
        lines = (self.get(custom_id) for custom_id in ids)
        return "".join(json.dumps({"custom_id": custom_id, "checked": line}) + "\n"
                       for custom_id, line in zip(ids, lines, strict=True) if line is not None)

    def _claim(self, raw: bytes, line: dict[str, Any]) -> None:
        found = _CLAIMED_ID.search(raw[:4096])
        if found:
            self._keep(found.group(1).decode("utf-8", "replace"), line)

    def _keep(self, custom_id: str, line: dict[str, Any]) -> None:
        if custom_id not in self.asked:
            return
        self._seen[custom_id] = self._seen.get(custom_id, 0) + 1
        self._lines.setdefault(custom_id, line)

    def _checked(self, line: dict[str, Any]) -> dict[str, Any]:
        """The line in the ledger's shape (:func:`answer_of`): an answer, or an error message."""
        own = line.get("checked")
        if isinstance(own, dict):  # a line of the ledger's own shape, checked again
            body, message = own.get("body"), own.get("message")
            if isinstance(body, dict) and own.get("status_code") == 200:
                return {"status_code": 200, "body": _masked(body, self._mask)}
            text = message if isinstance(message, str) else "batch line failed"
            return _error_line(_status(own.get("status_code")), self._mask(text)[:MAX_MESSAGE_CHARS])
        found = line.get("response")
        response: dict[str, Any] = found if isinstance(found, dict) else {}
        status = _status(response.get("status_code"))
        body = response.get("body")
        if status == 200 and isinstance(body, dict) and line.get("error") is None:
            return {"status_code": 200, "body": _masked(body, self._mask)}
        return _error_line(status, self._mask(line_error(line))[:MAX_MESSAGE_CHARS])


def line_error(line: dict[str, Any]) -> str:
    """The provider's reason for a failed line."""
    error = line.get("error")
    if isinstance(error, dict) and error.get("message"):
        return f"batch line failed: {error.get('code') or 'error'}: {error['message']}"
    response = line.get("response")
    body = response.get("body") if isinstance(response, dict) else None
    inner = body.get("error") if isinstance(body, dict) else None
    if isinstance(inner, dict) and inner.get("message"):
        return f"batch line failed: {response.get('status_code')}: {inner['message']}"  # type: ignore[union-attr]
    return "batch line failed"


def _error_line(status: int | None, message: str) -> dict[str, Any]:
    return {"status_code": status, "message": message}


def _status(value: Any) -> int | None:
    """An HTTP status from a line (an int of 100–599; anything else is none)."""
    return value if type(value) is int and 100 <= value <= 599 else None


def _masked(value: Any, mask: Callable[[str], str]) -> Any:
    """``value`` with ``mask`` applied to every string in it (nesting is bounded by the parser)."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask(k): _masked(v, mask) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, mask) for v in value]
    return value
