"""Progress on long runs: done/total, rate, errors, on stderr.

On a terminal the line is redrawn in place a few times a second; elsewhere (CI
logs) a line is printed every ``interval`` seconds, so logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Counts finished cells and prints a throttled status line."""

    def __init__(
        self, total: int, *, enabled: bool = True, stream: TextIO | None = None, label: str = ""
    ) -> None:
        self.total = total
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.label = label
        self.done = self.passed = self.errors = self.skipped = 0
        self.started = time.monotonic()
        self.tty = self.stream.isatty()
        self.interval = 0.25 if self.tty else 10.0
        self.last = 0.0

    def skip(self, n: int) -> None:
        """Count cells that resume found already stored."""
        self.skipped += n
        self._maybe_print()

    def advance(self, *, passed: bool, error: bool) -> None:
        """Count one finished cell."""
        self.done += 1
        self.passed += passed
        self.errors += error
        self._maybe_print()

    def line(self) -> str:
        """The current status line."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        finished = self.done + self.skipped
        pct = 100.0 * finished / self.total if self.total else 100.0
        return (
            f"{self.label}{finished}/{self.total} ({pct:.0f}%) "
            f"{self.done / elapsed:.1f} cells/s  passed={self.passed} "
            f"errors={self.errors} resumed={self.skipped}"
        )

    def _maybe_print(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < self.interval:
            return
        self.last = now
        end = "\r" if self.tty else "\n"
        self.stream.write(self.line() + end)
        self.stream.flush()

    def close(self) -> None:
        """Print the final line."""
        if self.enabled:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
