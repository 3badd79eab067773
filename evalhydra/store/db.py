"""The store: batched writes, resume reads, runs (:mod:`~evalhydra.store.connection` opens its file,
:mod:`~evalhydra.store.inserts` writes the rows).

One file (WAL mode, busy timeout) that several processes can write at once:
each batch starts with ``BEGIN IMMEDIATE`` so writers queue on the lock instead
of failing.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.store.connection import connect, immediate
from evalhydra.store.fractions import save_case_fractions
from evalhydra.store.inserts import (
    QUOTED_RESULT_COLUMNS,
    ReusedCells,
    Shape,
    attempt_values,
    checked_attempt,
    delete_claims,
    insert_members,
    insert_present,
    insert_reused,
    scrubbed,
    typed_row,
    written_cells,
)
from evalhydra.store.rows import (
    ATTEMPT_FIELDS,
    INFRA_ERROR_SQL,
    ResultRow,
    checked_row,
    now_iso,
    row_values,
)
from evalhydra.store.schema import MIGRATIONS, SCHEMA_VERSION
from evalhydra.store.sqlite_lib import disable_memory_statistics
from evalhydra.store.views import VERSION_JOIN, create_views, latest_version_sql

__all__ = ["Batch", "Store", "migrate", "open_store", "process_gone"]


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


@dataclass
class Batch:
    """Rows written together in one transaction."""

    results: list[ResultRow] = field(default_factory=list)
    members: list[tuple[str, str]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    #: Stored cells runs reuse, each naming the version it read.
    reused: list[ReusedCells] = field(default_factory=list)

    def __len__(self) -> int:
        return (len(self.results) + len(self.members) + len(self.attempts)
                + sum(len(cells.keys) for cells in self.reused))

    def extend(self, other: Batch) -> None:
        """Append another batch's rows."""
        self.results.extend(other.results)
        self.members.extend(other.members)
        self.attempts.extend(other.attempts)
        self.reused.extend(other.reused)


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
        results = [typed_row(r) for r in batch.results]
        settled = None
        if claims_of is not None:
            settled = (claims_of, [r.cell_key for r in results if not r.is_error])
        try:
            values = [row_values(r) for r in results]
        except (TypeError, ValueError, RecursionError):  # a container JSON cannot hold
            values = [row_values(r, lenient=True) for r in results]
        attempts = [attempt_values(a) for a in batch.attempts]
        try:
            self.write_values(values, batch.members, attempts, settled=settled, reused=batch.reused)
        except UnicodeEncodeError:  # a lone surrogate that slipped past the parsers: keep the row
            self.write_values(scrubbed(values), batch.members, scrubbed(attempts), settled=settled,
                              reused=batch.reused)
        except OverflowError:  # a number no row builder checked: the cell is kept, as an error
            values = [row_values(checked_row(r, whole=True), lenient=True) for r in results]
            self.write_values(values, batch.members, [checked_attempt(a) for a in attempts], settled=settled,
                              reused=batch.reused)

    def write_values(self, results: Sequence[Sequence[Any]], members: Sequence[Sequence[Any]],
                     attempts: Sequence[Sequence[Any]], *,
                     settled: tuple[str, Sequence[str]] | None = None,
                     reused: Sequence[ReusedCells] = ()) -> None:
        """Write rows already in column order atomically: ``results`` in ``RESULT_FIELDS`` order,
        ``members`` as ``(run_id, cell_key)``, ``attempts`` in ``ATTEMPT_FIELDS`` order.

        :meth:`write` builds these from a :class:`Batch`; ``bench/throughput.py`` times
        this alone as the store's floor.

        Args:
            results: Result rows.
            members: Run memberships.
            attempts: HTTP attempt rows.
            settled: ``(run_id, cell keys)``: that run's claims on these cells are deleted.
            reused: Stored cells runs reuse, each naming the version it read
                (:func:`~evalhydra.store.inserts.insert_reused`).
        """
        with immediate(self.conn):
            insert_present(self.conn, "insert or replace into results", QUOTED_RESULT_COLUMNS, results,
                           self._shapes["results"])
            insert_members(self.conn, members, written_cells(results))
            for cells in reused:
                insert_reused(self.conn, cells)
            insert_present(self.conn, "insert or replace into attempts", ATTEMPT_FIELDS, attempts,
                           self._shapes["attempts"])
            if settled is not None:
                delete_claims(self.conn, *settled)

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
            save_case_fractions(self.conn, run_id, summary.get("sources") or ())

    # -- reads ------------------------------------------------------------
    def done_versions(self, eval_ids: Sequence[str], service: str, *, retry_errors: bool,
                      client_errors: bool = False) -> dict[str, str]:
        """Cell keys already stored for these evals and service, each with the run that stored
        its newest version (the version a run reusing the cell holds).

        With ``retry_errors``, cells whose newest version is an infrastructure error are left
        out, so they run again; but a 4xx reply that cannot succeed as sent (any but 401,
        403, 408, 409 and 429) is kept unless ``client_errors`` too.
        """
        marks = ",".join("?" * len(eval_ids))
        sql = (f"select cell_key, run_id from results where service_name = ? and eval_id in ({marks})"
               f" and {latest_version_sql()}")
        if retry_errors:
            keep = "" if client_errors else f" or ({_FINAL_CLIENT_ERROR_SQL})"
            sql += f" and (not {INFRA_ERROR_SQL}{keep})"
        runs: dict[str, str] = {}  # one string per run id, not one per cell
        rows = self.conn.execute(sql, [service, *eval_ids])
        return {key: runs.setdefault(run_id, run_id) for key, run_id in rows}

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


#: A stored 4xx that a rerun would only get again: not 408 Request Timeout, 409 Conflict or 429,
#: nor 401/403, which new credentials fix without changing the request.
_FINAL_CLIENT_ERROR_SQL = "status_code between 400 and 499 and status_code not in (401, 403, 408, 409, 429)"


def migrate(db: sqlite_utils.Database) -> None:
    """Bring the schema up to :data:`SCHEMA_VERSION` (idempotent, concurrent-safe)."""
    with immediate(db.conn):
        version = db.conn.execute("pragma user_version").fetchone()[0]
        for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
            step(db)
            db.conn.execute(f"pragma user_version = {number}")
        if version < len(MIGRATIONS):
            create_views(db)  # as they are now: views are not migrations (store/views.py)


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
