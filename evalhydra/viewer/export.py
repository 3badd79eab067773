"""The grid as shown (its filter, search and sort), every page of it, as CSV or JSONL: one line per
trial of each case and target, outputs whole, streamed in chunks of cases.

A CSV file is opened in spreadsheets, which run a cell that starts with ``=``, ``+``, ``-``, ``@``
(or a tab or carriage return before one) as a formula: a model's output ``=HYPERLINK(…)`` would
become a live link. Such text cells are written with a leading ``'``, as OWASP's CSV-injection
advice has it; JSONL keeps every value as stored."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from evalhydra.analysis.selection import STATUS_SQL
from evalhydra.store.rows import INFRA_ERROR_SQL
from evalhydra.viewer.grid import grid_keys

__all__ = ["COLUMNS", "FORMATS", "export_lines"]

#: What each line holds, in order.
COLUMNS = ("eval", "case", "target", "trial", "status", "score", "error", "input", "ideal", "output",
           "reason")
#: Formats and their media types.
FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
#: Cases read per statement.
_CHUNK = 400

_ROWS_SQL = f"""select eval_id, case_id, service_name || '/' || coalesce(model, '') as t, run_index,
  {STATUS_SQL}, case when {INFRA_ERROR_SQL} then null else score end,
  case when {INFRA_ERROR_SQL} then coalesce(error_kind, status) end, input, ideal, output, failure_reason
from results indexed by idx_results_eval_case
where ({{where}}) and (eval_id, case_id) in (values {{keys}}) order by eval_id, case_id, t, run_index"""


def export_lines(conn: sqlite3.Connection, run_ids: Sequence[str], fmt: str, **grid: Any) -> Iterator[str]:
    """The lines of the grid's export (``grid``: :func:`~evalhydra.viewer.grid.grid_keys`'s filter,
    query, sort and base), the CSV header first; in the grid's case order."""
    sel, keys = grid_keys(conn, run_ids, **grid)
    if fmt == "csv":
        yield _csv_line(COLUMNS)
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start:start + _CHUNK]
        order = {key: i for i, key in enumerate(chunk)}
        sql = _ROWS_SQL.format(where=sel.where, keys=", ".join(["(?, ?)"] * len(chunk)))
        rows = conn.execute(sql, [*sel.params, *(part for key in chunk for part in key)]).fetchall()
        rows.sort(key=lambda row: (order[(row[0], row[1])], row[2], row[3]))  # the grid's order
        for row in rows:
            yield _csv_line(row) if fmt == "csv" else json.dumps(dict(zip(COLUMNS, row, strict=True)),
                                                                 ensure_ascii=False) + "\n"


#: The first characters that make a spreadsheet read a cell as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_line(values: Sequence[Any]) -> str:
    out = io.StringIO()
    csv.writer(out).writerow([_inert(v) for v in values])
    return out.getvalue()


def _inert(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula, quoted with ``'``; any other value as is."""
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_START) else value
