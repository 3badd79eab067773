"""Markdown's small parts: cells escaped so model output cannot break a table, tables, percents,
and how targets and cases are named (shared by ``report.md``'s sections)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from evalhydra.core.text import visible

__all__ = ["DASH", "case_name", "escape_cell", "md_table", "more_note", "pct", "target_name"]


DASH = "—"


def escape_cell(value: Any, limit: int = 120) -> str:
    """Make any value safe inside a Markdown table cell (or a one-line bullet)."""
    text = "" if value is None else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = visible(html.escape(text, quote=False).replace("\r", " "))
    return text.replace("|", r"\|").replace("\n", "<br>")


def md_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], numeric: Sequence[int] = ()) -> str:
    """A GitHub table; columns listed in ``numeric`` hold numbers and are right-aligned."""
    text_columns = [i for i in range(len(headers)) if i not in numeric]
    return tabulate(rows, headers=list(headers), tablefmt="github",
                    disable_numparse=text_columns if numeric else True)


def pct(value: float) -> str:
    return f"{value:.1%}"


def target_name(service: str, model: str) -> str:
    return f"{service}/{model}" if model else service


def case_name(eval_id: str, case_id: str) -> str:
    return f"{eval_id}/{case_id}"


def more_note(shown: int, total: int, what: str) -> str:
    if total <= shown:
        return ""
    return (f"\n\n_Showing the first {shown:,} of {total:,} {what}; query the store for the rest"
            " (`evalhydra results`, `evalhydra query`)._")
