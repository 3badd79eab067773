"""The terminal bar keeps its label and fits the terminal (issue 37)."""

from __future__ import annotations

import io
import re

import pytest

from evalhydra.execute.progress import Progress
from evalhydra.execute.progress_bar import TerminalBar

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _frame(width: int, label: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    stream = io.StringIO()
    bar = TerminalBar(3000, stream, label)
    state = Progress(3000, enabled=False)
    for i in range(1290):
        state.advance(passed=i % 3 != 0, error=i % 50 == 0)
    bar.show(state)
    bar.stop()
    return ANSI.sub("", stream.getvalue())


@pytest.mark.parametrize("width", [60, 80, 100, 160])
def test_the_label_and_the_eta_survive_every_width(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _frame(width, "[mock_slow] ", monkeypatch)
    last = [line for line in text.splitlines() if line.strip()][-1]
    assert "[mock_slow]" in last and "1290/3000" in last and "eta" in last
    assert "…" not in last and len(last) <= width


def test_the_counts_shrink_before_they_go(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "cells/s" in _frame(160, "mock", monkeypatch)
    narrow = _frame(80, "mock", monkeypatch)
    assert "cells/s" not in narrow and "✓860 ✗404 !26" in narrow
    assert "✓" not in _frame(60, "mock", monkeypatch) and "eta" in _frame(60, "mock", monkeypatch)
