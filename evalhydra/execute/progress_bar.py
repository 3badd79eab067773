"""The terminal progress bar: ``rich`` draws it, :class:`evalhydra.execute.progress.Progress` feeds
it (through :class:`Counts`, so this module imports nothing of the one that loads it)."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable
from typing import Protocol, TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress

__all__ = ["Counts", "TerminalBar"]


class Counts(Protocol):
    """What the bar shows: the cells done, passed, failed, errored and resumed since ``started``."""

    started: float
    done: int
    passed: int
    errors: int
    skipped: int
    extra: Callable[[], str] | None

    @property
    def failed(self) -> int:
        """Cells scored and not passed."""


#: Widths the counts take: in full (rate, passed, failed, errors, resumed) and compact (✓ ✗ !).
_FULL_COUNTS, _SHORT_COUNTS = 80, 16
_MIN_BAR, _MAX_BAR = 10, 40


class TerminalBar:
    """The terminal bar: ``rich`` redraws it; the run's progress feeds it the counts.

    It fits the terminal: as the width shrinks, the bar narrows, the counts become compact,
    then go; the label (a service name is data, not markup), the count of cells, the elapsed
    time and the ETA always stay.
    """

    def __init__(self, total: int, stream: TextIO, label: str) -> None:
        console = Console(file=stream)
        short = textwrap.shorten(label.strip() or "eval", 24, placeholder="…")
        # label, "done/total", elapsed, "eta", remaining, and the spaces between the columns
        fixed = len(short) + 2 * len(str(total)) + 1 + 7 + 3 + 7 + 7
        room = console.width - fixed
        self.counts = ("full" if room >= _FULL_COUNTS + _MIN_BAR
                       else "short" if room >= _SHORT_COUNTS + _MIN_BAR else "")
        taken = {"full": _FULL_COUNTS, "short": _SHORT_COUNTS, "": 0}[self.counts]
        columns: list[ProgressColumn] = [
            TextColumn(escape(short)), BarColumn(bar_width=max(_MIN_BAR, min(_MAX_BAR, room - taken - 1))),
            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()]
        if self.counts:
            columns.append(TextColumn("{task.fields[counts]}"))
        self.progress = RichProgress(*columns, console=console, transient=False)
        self.task = self.progress.add_task("cells", total=total, counts="")
        self.progress.start()

    def show(self, state: Counts) -> None:
        """Redraw the bar with ``state``'s counts."""
        elapsed = max(time.monotonic() - state.started, 1e-9)
        if self.counts == "full":
            counts = (f"{state.done / elapsed:.1f} cells/s  passed {state.passed}  failed {state.failed}  "
                      f"errors {state.errors}  resumed {state.skipped}")
        else:
            counts = f"✓{state.passed} ✗{state.failed} !{state.errors}"
        extra = state.extra() if state.extra is not None else ""
        if extra:
            counts += f"  {extra}"
        self.progress.update(self.task, completed=state.done + state.skipped, counts=counts)

    def stop(self) -> None:
        """Stop redrawing; the last frame stays on the terminal."""
        self.progress.stop()
