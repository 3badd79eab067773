"""A connection to the store: batched writes, resume reads, runs.

One file (WAL mode, busy timeout) that several processes can write at once:
each batch starts with ``BEGIN IMMEDIATE`` so writers queue on the lock instead
of failing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import sqlite_utils

from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.store.fractions import save_case_fractions
from evalhydra.store.rows import (
    ATTEMPT_FIELDS,
    INFRA_ERROR_SQL,
    RESULT_FIELDS,
    ResultRow,
    checked_row,
    now_iso,
    row_values,
    storable,
)
from evalhydra.store.schema import MIGRATIONS, SCHEMA_VERSION
from evalhydra.store.sqlite_lib import disable_memory_statistics
from evalhydra.store.views import VERSION_JOIN, create_views, latest_version_sql

__all__ = ["Batch", "Store", "connect", "immediate", "insert_present", "insert_rows", "migrate", "open_store",
           "process_gone"]


def _null(value: None) -> None:
    return None


# sqlite3 binds only exact int, float, str and bytearray directly; any other value (None,
# a bool, bytes) first misses the adapter registry and then looks for ``__adapt__`` and
# ``__conform__``, a slow path a result row's NULL columns and flags would take for every
# value. Registered adapters are found at the first lookup and bind exactly what the
# default path binds: NULL, and 0 or 1.
sqlite3.register_adapter(type(None), _null)
sqlite3.register_adapter(bool, int)

# Before the process opens its first connection: see evalhydra.store.sqlite_lib.
disable_memory_statistics()


#: A column selection of an insert: the columns it names, and those of them bound once.
Shape = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass
class Batch:
    """Rows written together in one transaction."""

    results: list[ResultRow] = field(default_factory=list)
    members: list[tuple[str, str]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.results) + len(self.members) + len(self.attempts)

    def extend(self, other: Batch) -> None:
        """Append another batch's rows."""
        self.results.extend(other.results)
        self.members.extend(other.members)
        self.attempts.extend(other.attempts)


class Store:
    """A connection to the store; writes must come from a single task/thread."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.conn = connect(path, read_only)
        #: The column selections of this connection's inserts (see :func:`insert_present`).
        self._shapes: dict[str, set[Shape]] = {"results": set(), "attempts": set()}
        self.db = sqlite_utils.Database(self.conn)
        version = int(self.conn.execute("pragma user_version").fetchone()[0])
        if version > SCHEMA_VERSION and not read_only:
            self.conn.close()
            raise EvalHydraError(
                f"store.path={path}: the store has schema version {version}, newer than this "
                f"evalhydra's {SCHEMA_VERSION}; it is not opened for writing.",
                "Upgrade evalhydra (pip install -U evalhydra), or choose another store.path.")
        if not read_only:
            migrate(self.db)
            self._close_abandoned_runs()

    def _close_abandoned_runs(self) -> None:
        """Runs this host left ``running`` whose process is gone (killed with -9, a crash)
        become ``interrupted``: their stored results stay, a rerun resumes them, and
        their cell claims are released. Claims of runs that ended are released too."""
        rows = self.conn.execute("select run_id, pid from runs where status = 'running' and hostname = ?",
                                 [socket.gethostname()]).fetchall()
        gone = [(run_id,) for run_id, pid in rows if pid is not None and not _process_alive(int(pid))]
        if not gone and not self.conn.execute(f"select 1 {_ENDED_CLAIMS} limit 1").fetchone():
            return  # nothing to mend: opening the store takes no write lock
        with immediate(self.conn):
            self.conn.executemany("update runs set status = 'interrupted' where run_id = ?", gone)
            self.conn.execute(f"delete {_ENDED_CLAIMS}")

    def close(self) -> None:
        """Close the connection; a writable store is checkpointed first, so the file alone holds
        every row (a shard can be copied without its ``-wal`` file)."""
        if not self.read_only:  # busy (another process reading): its checkpoint folds the WAL in
            with contextlib.suppress(sqlite3.OperationalError):
                self.conn.execute("pragma wal_checkpoint(truncate)")
        self.conn.close()

    # -- writes -----------------------------------------------------------
    def write(self, batch: Batch, *, claims_of: str | None = None) -> None:
        """Write a batch atomically (``BEGIN IMMEDIATE`` … ``COMMIT``).

        Args:
            batch: The rows.
            claims_of: The run whose claims on the batch's results end in the same
                transaction (see :mod:`evalhydra.store.claims`), except on infrastructure
                errors, which the run holds until it ends.
        """
        if not len(batch):
            return
        results = [_typed(r) for r in batch.results]
        settled = None
        if claims_of is not None:
            settled = (claims_of, [r.cell_key for r in results if not r.is_error])
        try:
            values = [row_values(r) for r in results]
        except (TypeError, ValueError, RecursionError):  # a container JSON cannot hold
            values = [row_values(r, lenient=True) for r in results]
        attempts = [_attempt_values(a) for a in batch.attempts]
        try:
            self.write_values(values, batch.members, attempts, settled=settled)
        except UnicodeEncodeError:  # a lone surrogate that slipped past the parsers: keep the row
            self.write_values(_scrubbed(values), batch.members, _scrubbed(attempts), settled=settled)
        except OverflowError:  # a number no row builder checked: the cell is kept, as an error
            values = [row_values(checked_row(r, whole=True), lenient=True) for r in results]
            self.write_values(values, batch.members, [_checked_attempt(a) for a in attempts], settled=settled)

    def write_values(self, results: Sequence[Sequence[Any]], members: Sequence[Sequence[Any]],
                     attempts: Sequence[Sequence[Any]], *,
                     settled: tuple[str, Sequence[str]] | None = None) -> None:
        """Write rows already in column order atomically: ``results`` in ``RESULT_FIELDS`` order,
        ``members`` as ``(run_id, cell_key)``, ``attempts`` in ``ATTEMPT_FIELDS`` order.

        :meth:`write` builds these from a :class:`Batch`; ``bench/throughput.py`` times
        this alone as the store's floor.

        Args:
            results: Result rows.
            members: Run memberships.
            attempts: HTTP attempt rows.
            settled: ``(run_id, cell keys)``: that run's claims on these cells are deleted.
        """
        with immediate(self.conn):
            insert_present(self.conn, "insert or replace into results", _RESULT_COLUMNS, results,
                           self._shapes["results"])
            _insert_members(self.conn, members, _written(results))
            insert_present(self.conn, "insert or replace into attempts", ATTEMPT_FIELDS, attempts,
                           self._shapes["attempts"])
            if settled is not None:
                _delete_claims(self.conn, *settled)

    def start_run(self, row: dict[str, Any]) -> None:
        """Insert the ``runs`` row of a new invocation."""
        with immediate(self.conn):
            self.db.table("runs").insert(row, replace=True)

    def finish_run(self, run_id: str, **fields: Any) -> None:
        """Update a run's status, finish time and counts."""
        with immediate(self.conn):
            self.db.table("runs").update(run_id, fields)

    def save_run_summary(self, run_id: str, summary: Mapping[str, Any]) -> None:
        """Keep a run's summary (:func:`evalhydra.analysis.runsummary.run_summary`) and its per-case
        fractions (:mod:`evalhydra.store.fractions`), replacing any."""
        row = {"run_id": run_id, "cells": summary["cells"], "summary": json.dumps(summary),
               "saved_at": now_iso()}
        with immediate(self.conn):
            self.db.table("run_summaries").upsert(row, pk="run_id")
            save_case_fractions(self.conn, run_id)

    # -- reads ------------------------------------------------------------
    def done_keys(self, eval_ids: Sequence[str], service: str, *, retry_errors: bool,
                  client_errors: bool = False) -> set[str]:
        """Cell keys already stored for these evals and service.

        With ``retry_errors``, cells whose newest version is an infrastructure error are left
        out, so they run again; but a 4xx reply that cannot succeed as sent (any but 401,
        403, 408, 409 and 429) is kept unless ``client_errors`` too.
        """
        marks = ",".join("?" * len(eval_ids))
        sql = (f"select cell_key from results where service_name = ? and eval_id in ({marks})"
               f" and {latest_version_sql()}")
        if retry_errors:
            keep = "" if client_errors else f" or ({_FINAL_CLIENT_ERROR_SQL})"
            sql += f" and (not {INFRA_ERROR_SQL}{keep})"
        return {row[0] for row in self.conn.execute(sql, [service, *eval_ids])}

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[dict[str, Any]]:
        """Run a SELECT and yield rows as dicts."""
        cursor = self.conn.execute(sql, params)
        names = [d[0] for d in cursor.description]
        for row in cursor:
            yield dict(zip(names, row, strict=True))

    def run_rows(self, run_ids: Sequence[str]) -> Iterator[dict[str, Any]]:
        """Every result that belongs to the given runs, in a stable order."""
        marks = ",".join("?" * len(run_ids))
        sql = (
            f"select distinct r.* from run_cells rc join results r on {VERSION_JOIN} "
            f"where rc.run_id in ({marks}) "
            'order by r."group", r.eval_id, r.service_name, r.run_index, r.case_id, r.model'
        )
        return self.query(sql, list(run_ids))

    def resolve_run_ids(self, ids: Sequence[str]) -> list[str]:
        """Expand ``latest`` and unique prefixes to full run ids.

        Raises:
            EvalHydraError: An unknown or ambiguous id, or ``latest`` in an empty store.
        """
        known = [r["run_id"] for r in self.query("select run_id from runs order by started_at desc, run_id")]
        return [_resolve_one(given, known) for given in ids]

    def runs(self, run_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """``runs`` rows, newest first (optionally only some ids)."""
        if run_ids:
            marks = ",".join("?" * len(run_ids))
            return list(self.query(f"select * from runs where run_id in ({marks})", list(run_ids)))
        return list(self.query("select * from runs order by started_at desc, run_id"))


#: Claims left by runs that are no longer running (released at their end, unless they crashed).
_ENDED_CLAIMS = "from claims where run_id in (select run_id from runs where status != 'running')"


def process_gone(hostname: str | None, pid: int | None) -> bool:
    """Whether a run recorded as ``running`` by ``pid`` on ``hostname`` has lost its process: on
    this host, with no such process any more (killed with -9, a crash). Another host's is unknown."""
    return hostname == socket.gethostname() and pid is not None and not _process_alive(int(pid))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _resolve_one(given: str, known: list[str]) -> str:
    if given == "latest":
        if not known:
            raise EvalHydraError("The store has no runs yet.", "Run an eval first.")
        return known[0]
    matches = [k for k in known if k == given] or [k for k in known if k.startswith(given)]
    if len(matches) != 1:
        what = "is ambiguous" if matches else "not found"
        raise EvalHydraError(f"Run '{given}' {what}.",
                             did_you_mean(given, known[:50]) + "\nList the runs with: evalhydra runs")
    return matches[0]


def connect(path: Path, read_only: bool) -> sqlite3.Connection:
    """A connection to the store file: WAL, a 30 s busy timeout and recursive triggers for writing,
    query-only otherwise."""
    if read_only:
        conn = sqlite3.connect(read_only_uri(path), uri=True, timeout=30, check_same_thread=False)
        conn.execute("pragma query_only = 1")
        return conn
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
    use_wal(conn)
    conn.execute("pragma synchronous = normal")
    conn.execute("pragma busy_timeout = 30000")
    conn.execute("pragma recursive_triggers = on")  # a REPLACE fires delete triggers (run_summaries)
    return conn


def use_wal(conn: sqlite3.Connection, patience_s: float = 30.0) -> None:
    """Switch ``conn``'s file to WAL.

    Processes that open a new file at once (a sweep's jobs, runs sharing a response cache) race
    to switch it, and SQLite answers the losers "database is locked" at once, without its busy
    handler: they try again until the winner is done, for up to ``patience_s`` seconds.
    """
    give_up = time.monotonic() + patience_s
    while True:
        try:
            conn.execute("pragma journal_mode = wal")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > give_up:
                raise
            time.sleep(0.01)


class immediate:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("begin immediate")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.conn.execute("rollback" if exc_type else "commit")


def read_only_uri(path: str | Path) -> str:
    """The SQLite URI that opens ``path`` read-only; ``#``, ``?`` and ``%`` in it are escaped."""
    return Path(path).resolve().as_uri() + "?mode=ro"


#: A stored 4xx that a rerun would only get again: not 408 Request Timeout, 409 Conflict or 429,
#: nor 401/403, which new credentials fix without changing the request.
_FINAL_CLIENT_ERROR_SQL = "status_code between 400 and 499 and status_code not in (401, 403, 408, 409, 429)"

_SURROGATES = re.compile("[\ud800-\udfff]")


def _scrubbed(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The rows with every unpaired surrogate (which SQLite cannot store) shown as U+FFFD."""
    return [[_SURROGATES.sub("\ufffd", v) if isinstance(v, str) else v for v in row] for row in rows]


def migrate(db: sqlite_utils.Database) -> None:
    """Bring the schema up to :data:`SCHEMA_VERSION` (idempotent, concurrent-safe)."""
    with immediate(db.conn):
        version = db.conn.execute("pragma user_version").fetchone()[0]
        for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
            step(db)
            db.conn.execute(f"pragma user_version = {number}")
        if version < len(MIGRATIONS):
            create_views(db)  # as they are now: views are not migrations (store/views.py)


_RESULT_COLUMNS = tuple(f'"{c}"' for c in RESULT_FIELDS)  # quoted: ``group`` is a keyword
#: A run's own result: its membership names the version it wrote (a newer one of its own replaces it).
_OWN_MEMBER = "insert or replace into run_cells (run_id, result_run_id, cell_key) values "
#: A stored cell a run reuses: its membership names the cell's newest version.
_REUSED_MEMBER = ("insert or ignore into run_cells (run_id, cell_key, result_run_id) select ?, r.cell_key, "
                  "r.run_id from results r where r.cell_key in ({marks}) and " + latest_version_sql("r."))
_KEY_AT, _RUN_AT = RESULT_FIELDS.index("cell_key"), RESULT_FIELDS.index("run_id")
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


def _written(results: Sequence[Sequence[Any]]) -> set[tuple[str, str]]:
    """The ``(run_id, cell_key)`` of result rows in column order."""
    return {(row[_RUN_AT], row[_KEY_AT]) for row in results}


def _insert_members(conn: sqlite3.Connection, members: Sequence[Sequence[Any]],
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


def _delete_claims(conn: sqlite3.Connection, run_id: str, keys: Sequence[str]) -> None:
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


def _typed(row: ResultRow | Mapping[str, Any]) -> ResultRow:
    """Rows are :class:`ResultRow`; a mapping is checked column by column (unknown keys refused)."""
    return row if isinstance(row, ResultRow) else ResultRow.from_mapping(row)


def _checked_attempt(values: list[Any]) -> list[Any]:
    """An attempt row with any integer past 64 bits (or non-finite number) left out."""
    return [v if storable(v) else None for v in values]


def _attempt_values(row: Mapping[str, Any]) -> list[Any]:
    return list(map(row.get, ATTEMPT_FIELDS))


def open_store(path: str | Path, *, read_only: bool = False) -> Store:
    """Open (and, for writing, create and migrate) the store at ``path``."""
    target = Path(path).expanduser()
    if read_only and not target.exists():
        raise EvalHydraError(f"No store at {target}.", "Run an eval first, or pass --store PATH.")
    try:
        return Store(target, read_only=read_only)
    except (sqlite3.DatabaseError, OSError) as exc:
        raise EvalHydraError(
            f"store.path={target}: cannot open the store ({exc}).",
            _store_hint(exc, read_only)) from None


def _store_hint(exc: BaseException, read_only: bool) -> str:
    if "not a database" in str(exc) or "malformed" in str(exc):
        return "The file is not an intact SQLite store; choose another store.path (or --store PATH)."
    if read_only:
        return "Check the path and its permissions (--store PATH)."
    return "Choose a path where a SQLite file can be written (store.path=..., or --store PATH)."
