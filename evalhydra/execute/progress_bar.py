"""The terminal progress bar: ``rich`` draws it, :class:`evalhydra.execute.progress.Progress` feeds it."""

from __future__ import annotations

import textwrap
import time
from typing import TYPE_CHECKING, TextIO

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

if TYPE_CHECKING:
    from evalhydra.execute.progress import Progress

__all__ = ["TerminalBar"]


#: Terminal widths at which the bar keeps its full counts, a compact form of them, or none.
_FULL_COUNTS, _SHORT_COUNTS = 130, 100


class TerminalBar:
    """The terminal bar: ``rich`` redraws it; :class:`Progress` feeds it the counts.

    It fits the terminal: as the width shrinks, the counts become compact, then go, and the
    bar narrows; the label (a service name is data, not markup) and the ETA always stay.
    """

    def __init__(self, total: int, stream: TextIO, label: str) -> None:
        console = Console(file=stream)
        self.width = console.width
        short = textwrap.shorten(label.strip() or "eval", 24, placeholder="…")
        columns: list[ProgressColumn] = [
            TextColumn(escape(short)), BarColumn(bar_width=max(10, min(40, self.width - 60))),
            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()]
        if self.width >= _SHORT_COUNTS:
            columns.append(TextColumn("{task.fields[counts]}"))
        self.progress = RichProgress(*columns, console=console, transient=False)
        self.task = self.progress.add_task("cells", total=total, counts="")
        self.progress.start()

    def show(self, state: Progress) -> None:
        """Redraw the bar with ``state``'s counts."""
        elapsed = max(time.monotonic() - state.started, 1e-9)
        if self.width >= _FULL_COUNTS:
            counts = (f"{state.done / elapsed:.1f} cells/s  passed {state.passed}  failed {state.failed}  "
                      f"errors {state.errors}  resumed {state.skipped}")
        else:
            counts = f"✓{state.passed} ✗{state.failed} !{state.errors}"
        self.progress.update(self.task, completed=state.done + state.skipped, counts=counts)

    def stop(self) -> None:
        """Stop redrawing; the last frame stays on the terminal."""
        self.progress.stop()
