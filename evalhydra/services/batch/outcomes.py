"""What a batch gives each request: its input line, its answer or error, or a deferral.

A request goes into a batch's input file as one line (:func:`request_line`), exactly the
body online mode sends. What it gets back is a :class:`LineOutcome`: the answer line's status
and body, an infrastructure error (``batch_line_failed``, ``batch_expired``, ``batch_failed``,
``batch_cancelled``), or ``deferred`` (:class:`BatchDeferred`: still pending at the
provider, or held back by ``run.max_cost_usd``; a rerun collects it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evalhydra.core.values import ErrorKind

__all__ = ["MISSING", "BatchDeferred", "LineOutcome", "batch_errors", "estimate_line_usd", "line_outcome",
           "request_line"]

#: What a line missing from a batch's files becomes, by the batch's final status.
MISSING = {
    "expired": (ErrorKind.BATCH_EXPIRED, "the batch expired before this line was answered"),
    "failed": (ErrorKind.BATCH_FAILED, "the provider refused the batch"),
    "cancelled": (ErrorKind.BATCH_CANCELLED, "the batch was cancelled before this line was answered"),
    "completed": (ErrorKind.BATCH_LINE_FAILED, "the batch completed without a line for this request"),
}


class BatchDeferred(Exception):  # noqa: N818 (not an error: the cell is left for a rerun)
    """The cell's batch is still pending at the provider (or was never submitted): nothing is
    stored, a rerun collects it. ``budget`` is True when ``run.max_cost_usd`` held it back."""

    def __init__(self, message: str, *, budget: bool = False) -> None:
        super().__init__(message)
        self.budget = budget


@dataclass(frozen=True)
class LineOutcome:
    """What a batch gave one request."""

    status_code: int | None = None
    body: bytes | None = None  # the response body (JSON)
    error_kind: ErrorKind | None = None
    message: str | None = None
    latency_ms: float = 0.0  # from the batch's submission to its output's download
    deferred: bool = False
    budget: bool = False  # deferred by run.max_cost_usd


def estimate_line_usd(body: bytes, input_per_mtok: float, output_per_mtok: float) -> float:
    """A rough online price of one request: a token per four bytes in, its ``max_tokens`` (or 64) out."""
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        payload = {}
    wanted = payload.get("max_tokens") or payload.get("max_completion_tokens")
    out = wanted if isinstance(wanted, int) and wanted > 0 else 64
    return (len(body) / 4 * input_per_mtok + out * output_per_mtok) / 1e6


def request_line(custom_id: str, body: bytes, url_path: str) -> bytes:
    """One request line of a batch input file (the body exactly as online mode sends it)."""
    return b'{"custom_id":%s,"method":"POST","url":%s,"body":%s}' % (
        json.dumps(custom_id).encode(), json.dumps(url_path).encode(), body)


def line_outcome(line: dict[str, Any], latency: float) -> LineOutcome:
    """A checked line (:class:`BatchLines`) as what its request gets."""
    if "body" in line:
        return LineOutcome(200, json.dumps(line["body"]).encode(), latency_ms=latency)
    return LineOutcome(line["status_code"], error_kind=ErrorKind.BATCH_LINE_FAILED, message=line["message"],
                       latency_ms=latency)


def batch_errors(batch: dict[str, Any]) -> str | None:
    """A failed batch's validation errors in one line."""
    errors = batch["errors"].get("data") if isinstance(batch.get("errors"), dict) else None
    if not errors or not isinstance(errors, list):
        return None
    shown = [f"line {e.get('line')}: {e.get('message')}" for e in errors[:3] if isinstance(e, dict)]
    return "; ".join(shown)[:2000] or None
