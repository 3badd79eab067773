"""What the mock received, counted: ``GET /_mock/stats`` reads it, ``POST /_mock/reset`` zeroes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MockStats"]


@dataclass
class MockStats:
    """Counters of what the server received; ``POST /_mock/reset`` zeroes them.

    Attributes:
        requests: Every HTTP request, any path.
        chat_requests: Chat completion requests, faulted ones included.
        ok: Chat requests answered with a normal completion.
        faults: Chat requests per fault kind (``fail``, ``hang`` ...).
        bad_requests: Chat requests rejected with 400 (body not a JSON object).
        connections: Connections accepted.
        in_flight: Chat requests being handled now.
        max_in_flight: The most chat requests handled at once.
        rate_limited: Chat requests refused with 429 by the rate limit (``rate_limit_rps``).
        batch_lines: Lines of batch jobs answered (not counted in ``chat_requests``).
    """

    requests: int = 0
    chat_requests: int = 0
    ok: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    bad_requests: int = 0
    connections: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    rate_limited: int = 0
    batch_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Return the counters as a JSON-ready dict."""
        return {
            "requests": self.requests,
            "chat_requests": self.chat_requests,
            "ok": self.ok,
            "faults": dict(self.faults),
            "bad_requests": self.bad_requests,
            "connections": self.connections,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "rate_limited": self.rate_limited,
            "batch_lines": self.batch_lines,
        }

    def reset(self) -> None:
        """Zero every counter except ``in_flight``."""
        self.requests = self.chat_requests = self.ok = self.bad_requests = 0
        self.connections = self.max_in_flight = self.rate_limited = self.batch_lines = 0
        self.faults = {}
