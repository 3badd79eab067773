"""Artifacts with one entry per result, written row by row from SQLite.

``runs.json`` is zig_eval's ``{schema_version, runs: [...]}`` with exactly the
bytes ``json.dumps(zig.runs_json(rows), indent=2, ensure_ascii=False)`` would
give, but each run object is assembled by SQLite (``json_quote``), sorted by
SQLite, and written as it arrives, so a million results never sit in a Python
list. Only the score goes through Python, to print it with ``repr`` like
``json.dumps``. (Sorting the finished text costs less than sorting row ids and
fetching each row again in sorted order.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import TextIO

from evalhydra.analysis.selection import SEED_ORDER_SQL, Selection
from evalhydra.analysis.zigstats import SCHEMA_VERSION
from evalhydra.core.zig_numbers import json_number

__all__ = ["runs_json_chunks", "write_runs_json"]

_IND = "      "
_LATENCY = "max(0, cast(coalesce(latency_ms, 0) + 0.5 as integer))"


def _bool(column: str) -> str:
    return f"(case when {column} then 'true' else 'false' end)"


def _opt_int(column: str) -> str:
    return f"coalesce(cast({column} as integer), 'null')"


_FIELDS_BEFORE_SCORE = [
    ("group", 'json_quote("group")'),
    ("eval_id", "json_quote(eval_id)"),
    ("service_name", "json_quote(service_name)"),
    ("model", "json_quote(coalesce(reply_model, model))"),  # zig_eval names the reply's model
    ("run_index", "cast(run_index as integer)"),
    ("case_id", "json_quote(case_id)"),
    ("output", "json_quote(output)"),
    ("passed", _bool("passed")),
]
_FIELDS_AFTER_SCORE = [
    ("failure_reason", "json_quote(failure_reason)"),
    ("status_code", _opt_int("status_code")),
    ("attempt_count", "coalesce(cast(attempt_count as integer), 0)"),
    ("retried", _bool("retried")),
    ("judge_attempt_count", "coalesce(cast(judge_attempt_count as integer), 0)"),
    ("judge_retried", _bool("judge_retried")),  # false when no judge ran, as zig_eval writes it
    ("judge_status_code", _opt_int("judge_status_code")),
    ("latency_ms", _LATENCY),
]


def _concat(fields: list[tuple[str, str]], lead: str, tail: str) -> str:
    parts = [f"'{lead}'"]
    for index, (key, expr) in enumerate(fields):
        sep = "" if index == 0 else ",\n"
        parts.append(f"'{sep}{_IND}\"{key}\": ' || {expr}")
    parts.append(f"'{tail}'")
    return " || ".join(parts)


_BLOCK_COLUMNS = (
    _concat(_FIELDS_BEFORE_SCORE, "    {\n", f',\n{_IND}"score": ') + ", score, "
    + _concat(_FIELDS_AFTER_SCORE, ",\n", "\n    }")
)


#: Most distinct scores whose text :func:`runs_json_chunks` keeps (a pass/fail eval has two).
_NUMBERS_KEPT = 4096


def runs_json_chunks(conn: sqlite3.Connection, sel: Selection) -> Iterator[str]:
    """The run objects of ``runs.json`` (indented text), in seed order, a few thousand per chunk.

    Each chunk is one join of its pieces, and a score's text is made once per distinct
    score, not once per result.
    """
    sql = f"select {_BLOCK_COLUMNS} from results where {sel.where} order by {SEED_ORDER_SQL}"
    cursor = conn.execute(sql, sel.params)
    numbers: dict[object, str] = {None: "0"}
    for rows in iter(lambda: cursor.fetchmany(2000), []):
        parts: list[str] = []
        add = parts.extend
        for head, score, tail in rows:
            text = numbers.get(score)
            if text is None:
                text = json_number(float(score))
                if len(numbers) < _NUMBERS_KEPT:
                    numbers[score] = text
            add((head, text, tail, ",\n"))
        parts.pop()
        yield "".join(parts)


def write_runs_json(conn: sqlite3.Connection, sel: Selection, out: TextIO) -> None:
    """Write ``runs.json`` for ``sel`` to ``out``."""
    out.write(f'{{\n  "schema_version": {SCHEMA_VERSION},\n  "runs": [')
    sep = "\n"
    for chunk in runs_json_chunks(conn, sel):
        out.write(sep)
        out.write(chunk)
        sep = ",\n"
    out.write("]\n}\n" if sep == "\n" else "\n  ]\n}\n")
