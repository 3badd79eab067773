"""The terminal progress bar: ``rich`` draws it, :class:`evalhydra.execute.progress.Progress` feeds it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress

if TYPE_CHECKING:
    from evalhydra.execute.progress import Progress

__all__ = ["TerminalBar"]


class TerminalBar:
    """The terminal bar: ``rich`` redraws it; :class:`Progress` feeds it the counts."""

    def __init__(self, total: int, stream: TextIO, label: str) -> None:
        self.progress = RichProgress(
            TextColumn(label.strip() or "eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[counts]}"),
            console=Console(file=stream),
            transient=False,
        )
        self.task = self.progress.add_task("cells", total=total, counts="")
        self.progress.start()

    def show(self, state: Progress) -> None:
        """Redraw the bar with ``state``'s counts."""
        elapsed = max(time.monotonic() - state.started, 1e-9)
        counts = (f"{state.done / elapsed:.1f} cells/s  passed {state.passed}  failed {state.failed}  "
                  f"errors {state.errors}  resumed {state.skipped}")
        self.progress.update(self.task, completed=state.done + state.skipped, counts=counts)

    def stop(self) -> None:
        """Stop redrawing; the last frame stays on the terminal."""
        self.progress.stop()
