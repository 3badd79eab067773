"""Progress on long runs: a bar with ETA on a terminal, plain periodic lines in CI logs.

On a terminal, ``rich`` draws a bar with done/total, elapsed time, ETA, rate and
the passed/failed/error counts, a few times a second. Elsewhere (CI logs, a
pipe) the run prints a plain line every :data:`HEARTBEAT_S` seconds of its clock whatever
happens (:meth:`Progress.heartbeat`, from the runner's heartbeat task): done/total, cells in
flight, and the endpoints' 429s and current limits, so a run that waits on a hung server or a
rate limit still says so. Cells found already stored count as done from the start.

``rich`` (and the bar module) is imported only on a terminal: a CI log never
needs it, and importing ``rich.progress`` is a visible part of start-up
(``bench/startup.py``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Protocol, TextIO

__all__ = ["HEARTBEAT_S", "Progress"]

#: Off a terminal, the longest silence: a status line at least this often (seconds).
HEARTBEAT_S = 10.0


class _Bar(Protocol):
    def show(self, state: Progress) -> None: ...

    def stop(self) -> None: ...


def _terminal_bar(total: int, stream: TextIO, label: str) -> _Bar:
    from evalhydra.execute.progress_bar import TerminalBar  # rich: only on a terminal

    return TerminalBar(total, stream, label)


class Progress:
    """Counts finished cells and shows them, throttled."""

    def __init__(
        self, total: int, *, enabled: bool = True, stream: TextIO | None = None, label: str = ""
    ) -> None:
        self.total = total
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.label = label
        self.done = self.passed = self.errors = self.skipped = 0
        self.in_flight = 0  # cells started and not finished
        self.started = time.monotonic()
        self.tty = self.stream.isatty()
        self.interval = 0.1 if self.tty else HEARTBEAT_S
        self.last = 0.0
        self._bar = _terminal_bar(total, self.stream, label) if enabled and self.tty else None
        #: More to show after the counts (the endpoints' adaptive limits), or None.
        self.extra: Callable[[], str] | None = None
        #: A runner's heartbeat prints the plain lines (set by the runner while it runs).
        self.heartbeat_task = False

    @property
    def failed(self) -> int:
        """Cells run now that were scored and did not pass."""
        return self.done - self.passed - self.errors

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
        """The current status as one plain line."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        finished = self.done + self.skipped
        pct = 100.0 * finished / self.total if self.total else 100.0
        rate = self.done / elapsed
        eta = f"{(self.total - finished) / rate:.0f}s" if rate > 0 and finished < self.total else "-"
        extra = self.extra() if self.extra is not None else ""
        return (
            f"{self.label}{finished}/{self.total} ({pct:.0f}%) elapsed {elapsed:.0f}s eta {eta} "
            f"{rate:.1f} cells/s  in flight={self.in_flight} passed={self.passed} failed={self.failed} "
            f"errors={self.errors} resumed={self.skipped}{'  ' + extra if extra else ''}"
        )

    def heartbeat(self) -> None:
        """The runner's beat, every :data:`HEARTBEAT_S` seconds of the run's clock: off a terminal,
        a status line now, whether or not any cell finished; on one, a refresh of the bar."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._maybe_print()
            return
        self.last = time.monotonic()
        self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _maybe_print(self) -> None:
        if not self.enabled or (self._bar is None and self.heartbeat_task):
            return
        now = time.monotonic()
        if now - self.last < self.interval:
            return
        self.last = now
        if self._bar is not None:
            self._bar.show(self)
        else:
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Show the final state (and stop the bar)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.show(self)
            self._bar.stop()
        else:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
