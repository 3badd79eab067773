"""A dead endpoint, told early: when a run's first cells all fail to connect, time out or meet a
silent endpoint and none is answered, the run stops sending (``run.fail_fast``)."""

from __future__ import annotations

from dataclasses import dataclass

from evalhydra.core.values import ErrorKind
from evalhydra.store.rows import ResultRow

__all__ = ["FAIL_FAST_CELLS", "DeadEndpointWatch"]


#: Cells that must all fail to connect (or time out), with none answered, before a run stops
#: sending to a dead endpoint (``run.fail_fast``).
FAIL_FAST_CELLS = 20


_DEAD = frozenset({ErrorKind.CONNECT_ERROR, ErrorKind.TIMEOUT, ErrorKind.ENDPOINT_SILENT})


@dataclass
class DeadEndpointWatch:
    """Decides that an endpoint is dead: its first ``threshold`` cells all failed to connect
    or timed out and none of them got an answer. Once any cell is answered it never trips."""

    threshold: int
    failed: int = 0
    answered: bool = False
    reason: str = ""
    silent: bool = False  # the endpoint said nothing at all (its reason says so, and wins)

    def saw(self, row: ResultRow) -> bool:
        """Count a finished cell; True when the endpoint is now known to be dead."""
        if self.answered or not self.threshold:
            return False
        if row.error_kind not in _DEAD:
            self.answered = True
            return False
        self.failed += 1
        reason = row.failure_reason or row.error_kind or ""
        silent = row.error_kind == ErrorKind.ENDPOINT_SILENT
        if not self.reason or silent:  # the silent endpoint's words win
            self.reason, self.silent = reason, self.silent or silent
        return self.failed >= self.threshold
