"""Writing rows fast: multi-row inserts in few statement shapes, result rows checked and
scrubbed, run memberships, and the claims a written cell settles (what :meth:`Store.write`
does in one transaction)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

from evalhydra.store.rows import ATTEMPT_FIELDS, RESULT_FIELDS, ResultRow, storable
from evalhydra.store.views import latest_version_sql

__all__ = ["QUOTED_RESULT_COLUMNS", "ReusedCells", "Shape", "attempt_values", "checked_attempt",
           "delete_claims", "insert_members", "insert_present", "insert_reused", "insert_rows", "scrubbed",
           "typed_row", "written_cells"]

#: Where a result row's values hold its cell key and its run.
_KEY_AT, _RUN_AT = RESULT_FIELDS.index("cell_key"), RESULT_FIELDS.index("run_id")


#: A column selection of an insert: the columns it names, and those of them bound once.
Shape = tuple[tuple[int, ...], tuple[int, ...]]


_SURROGATES = re.compile("[\ud800-\udfff]")


def scrubbed(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The rows with every unpaired surrogate (which SQLite cannot store) shown as U+FFFD."""
    return [[_SURROGATES.sub("\ufffd", v) if isinstance(v, str) else v for v in row] for row in rows]


QUOTED_RESULT_COLUMNS = tuple(f'"{c}"' for c in RESULT_FIELDS)  # quoted: ``group`` is a keyword


#: A run's own result: its membership names the version it wrote (a newer one of its own replaces it).
_OWN_MEMBER = "insert or replace into run_cells (run_id, result_run_id, cell_key) values "


#: A stored cell a run reuses: its membership names the cell's newest version.
_REUSED_MEMBER = ("insert or ignore into run_cells (run_id, cell_key, result_run_id) select ?, r.cell_key, "
                  "r.run_id from results r where r.cell_key in ({marks}) and " + latest_version_sql("r."))


#: Rows per multi-row INSERT (45 columns × 256 rows stays under SQLite's 32766 variables).
_ROWS_PER_INSERT = 256


def insert_rows(conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[Any]], tail: str = "",
                tail_params: Sequence[Any] = (), shared: Sequence[Any] = ()) -> None:
    """Insert ``rows`` with a few multi-row ``VALUES`` statements, not one statement per row.

    Args:
        conn: The connection (in a transaction).
        head: The statement up to ``values`` (``insert into t (a, b) values ``).
        rows: Tuples in the head's column order (after the ``shared`` columns), all of one width.
        tail: SQL after the values (an ``on conflict`` clause), with ``tail_params``.
        shared: Values of the head's first columns that every row has: each statement binds
            them once (``?1``, ``?2``, … in every row) instead of once per row.

    The writer runs in a worker thread; every SQLite step releases and retakes
    the GIL, so one step per row made the writer queue for the GIL hundreds of
    times per batch behind the busy event loop. A statement per 256 rows takes
    it once each. Statements hold a power of two of rows (256, then the rest
    as 128 + 64 + …), so the connection's statement cache keeps at most nine
    shapes per table instead of one per batch size (which grew the writer's
    memory without bound over a long run).
    """
    if not rows:
        return
    shared_marks = [f"?{n}" for n in range(1, len(shared) + 1)]
    row_marks = f"({', '.join(shared_marks + ['?'] * len(rows[0]))})"
    start = 0
    for size in _chunk_sizes(len(rows)):
        chunk = rows[start:start + size]
        start += size
        marks = ", ".join([row_marks] * size)
        conn.execute(head + marks + tail, [*shared, *chain.from_iterable(chunk), *tail_params])


def insert_present(conn: sqlite3.Connection, into: str, columns: Sequence[str],
                   rows: Sequence[Sequence[Any]], shapes: set[Shape]) -> None:
    """Insert ``rows`` naming only the columns that hold a value in at least one of them, and
    binding once per statement the columns whose value is the same in all of them.

    Args:
        conn: The connection (in a transaction).
        into: The statement up to its column list (``insert or replace into results``).
        columns: The names of the rows' values, in order.
        rows: Tuples in ``columns`` order.
        shapes: The (present, shared) column selections used so far on this connection and
            table; at most :data:`_SHAPES` are used, then a new selection names every column.

    A column left out is NULL, as a bound None would be: no column of the
    tables written this way has a default (``tests/store/test_store.py`` checks). A
    chat result leaves about half of its columns NULL, and each bound NULL costs
    an adapter call, a bind and the connection's mutex; leaving them out is a
    large share of the writer's work per cell (docs/performance.md). Of the
    columns left, a chat batch shares most (run, eval, service, model, kind,
    status code, attempt counts): each is bound once per 256 rows, and SQLite
    copies it into each row while it steps, without the GIL. Columns are chosen
    per batch, not per row, and a cached 256-row statement is large, so the
    selections are bounded.
    """
    if not rows:
        return
    count = len(rows)
    by_column = list(zip(*rows, strict=True))
    present = tuple(i for i, column in enumerate(by_column) if column.count(None) < count)
    shared = tuple(i for i in present if _same(by_column[i])) if count > 1 else ()
    if len(shared) == len(present):  # repeated rows: each row still needs a column of its own
        shared = ()
    if (present, shared) not in shapes:
        if not present or len(shapes) >= _SHAPES:  # (a row needs one column: all of them, then)
            present, shared = tuple(range(len(columns))), ()
        shapes.add((present, shared))
    varying = [i for i in present if i not in shared]
    names = ", ".join(columns[i] for i in (*shared, *varying))
    values: Sequence[Sequence[Any]]
    if len(varying) == len(columns):
        values = rows
    elif len(varying) == 1:  # itemgetter with one index returns the value, not a tuple
        values = [(row[varying[0]],) for row in rows]
    else:
        values = list(map(itemgetter(*varying), rows))
    insert_rows(conn, f"{into} ({names}) values ", values, shared=[rows[0][i] for i in shared])


def _same(column: tuple[Any, ...]) -> bool:
    """Whether every value of ``column`` is its first, of the same type (1, 1.0 and True are
    equal, but SQLite stores them differently)."""
    return column.count(column[0]) == len(column) and len(set(map(type, column))) == 1


#: Most column selections :func:`insert_present` uses per table and connection (each brings
#: up to nine cached statements, and a 256-row statement is large).
_SHAPES = 8


def written_cells(results: Sequence[Sequence[Any]]) -> set[tuple[str, str]]:
    """The ``(run_id, cell_key)`` of result rows in column order."""
    return {(row[_RUN_AT], row[_KEY_AT]) for row in results}


def insert_members(conn: sqlite3.Connection, members: Sequence[Sequence[Any]],
                    written: set[tuple[str, str]]) -> None:
    """Record ``(run_id, cell_key)`` memberships with the version each names: the run's own row for
    a cell it wrote in this batch (``written``), else the cell's newest stored version."""
    own = [(run_id, key) for run_id, key in members if (run_id, key) in written]
    reused = [(run_id, key) for run_id, key in members if (run_id, key) not in written]
    runs = {run_id for run_id, _ in own}
    if len(runs) == 1:  # a run's batch binds its id once
        insert_rows(conn, _OWN_MEMBER, [(key,) for _, key in own], shared=[*runs, *runs])
    elif own:
        insert_rows(conn, _OWN_MEMBER, [(run_id, run_id, key) for run_id, key in own])
    for run_id in {run_id for run_id, _ in reused}:
        keys = [key for member_run, key in reused if member_run == run_id]
        start = 0
        for size in _chunk_sizes(len(keys)):
            conn.execute(_REUSED_MEMBER.format(marks=", ".join("?" * size)),
                         [run_id, *keys[start:start + size]])
            start += size


#: A stored cell a run reuses, naming the version the run read when it planned.
_REUSED_VERSION = "insert or ignore into run_cells (run_id, cell_key, result_run_id) values "
#: Reused cells' rows built at a time.
_REUSED_ROWS = 4096


@dataclass
class ReusedCells:
    """Stored cells a run reuses: their keys and, for each, the run that stored the version the
    run read (a mapping the run holds anyway, so a batch costs a list of keys)."""

    run_id: str
    keys: list[str]
    versions: Mapping[str, str]


def insert_reused(conn: sqlite3.Connection, reused: ReusedCells) -> None:
    """Record the memberships of stored cells a run reuses, each naming the version it read.

    Inserted in key order (``reused.keys`` is sorted in place): both of ``run_cells``' indexes
    are keyed by the cell key, a hash, so keys in plan order land on a different page each,
    while sorted keys fill pages in turn.
    """
    keys, versions = reused.keys, reused.versions
    keys.sort()
    for start in range(0, len(keys), _REUSED_ROWS):
        rows = [(key, versions[key]) for key in keys[start:start + _REUSED_ROWS]]
        insert_rows(conn, _REUSED_VERSION, rows, shared=[reused.run_id])


def delete_claims(conn: sqlite3.Connection, run_id: str, keys: Sequence[str]) -> None:
    """Delete ``run_id``'s claims on ``keys``, in statements of the sizes :func:`insert_rows` uses."""
    start = 0
    for size in _chunk_sizes(len(keys)):
        marks = ", ".join("?" * size)
        conn.execute(f"delete from claims where run_id = ? and cell_key in ({marks})",
                     [run_id, *keys[start:start + size]])
        start += size


def _chunk_sizes(total: int) -> list[int]:
    """``total`` as full chunks of :data:`_ROWS_PER_INSERT`, then powers of two."""
    full, rest = divmod(total, _ROWS_PER_INSERT)
    return [_ROWS_PER_INSERT] * full + [1 << bit for bit in range(rest.bit_length() - 1, -1, -1)
                                        if rest & (1 << bit)]


def typed_row(row: ResultRow | Mapping[str, Any]) -> ResultRow:
    """Rows are :class:`ResultRow`; a mapping is checked column by column (unknown keys refused)."""
    return row if isinstance(row, ResultRow) else ResultRow.from_mapping(row)


def checked_attempt(values: list[Any]) -> list[Any]:
    """An attempt row with any integer past 64 bits (or non-finite number) left out."""
    return [v if storable(v) else None for v in values]


def attempt_values(row: Mapping[str, Any]) -> list[Any]:
    return list(map(row.get, ATTEMPT_FIELDS))
