"""The ``batches`` table: every batch job a run sent, so no rerun pays for it again.

A batch is recorded *before* the provider is asked to create it (its cell keys
and input file), then follows the provider's status; once its output and error
files are downloaded they are kept in the row (``collected``) until every cell of
the batch is stored (``done``). A rerun reads the open rows of its services and
waits on those batches instead of sending their cells again.

The ledger has a connection of its own: it is written from trio's worker threads
while the store writer commits results on its connection.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalhydra.store.connection import connect, immediate
from evalhydra.store.rows import now_iso
from evalhydra.store.views import latest_version_sql

__all__ = ["BatchLedger", "BatchRecord", "list_batches"]


@dataclass
class BatchRecord:
    """One row of ``batches``."""

    batch_key: str
    run_id: str
    service: str
    endpoint: str
    custom_ids: list[str]
    status: str = "submitting"
    api_key_env: str | None = None
    batch_id: str | None = None
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_counts: dict[str, int] = field(default_factory=dict)
    message: str | None = None
    output: str | None = None
    errors: str | None = None
    submitted_at: float | None = None
    collected_at: float | None = None
    created_at: str = ""

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> BatchRecord:
        """A record from a ``select *`` row."""
        values = dict(row)
        return cls(
            batch_key=values["batch_key"], run_id=values["run_id"], service=values["service"],
            endpoint=values["endpoint"], custom_ids=json.loads(values["custom_ids"] or "[]"),
            status=values["status"], api_key_env=values["api_key_env"], batch_id=values["batch_id"],
            input_file_id=values["input_file_id"], output_file_id=values["output_file_id"],
            error_file_id=values["error_file_id"],
            request_counts=json.loads(values["request_counts"] or "{}"), message=values["message"],
            output=values["output"], errors=values["errors"], submitted_at=values["submitted_at"],
            collected_at=values["collected_at"], created_at=values["created_at"] or "")


_COLUMNS = ("batch_key", "run_id", "service", "endpoint", "api_key_env", "status", "batch_id",
            "input_file_id", "output_file_id", "error_file_id", "custom_ids", "lines", "request_counts",
            "message", "output", "errors", "submitted_at", "collected_at", "created_at", "updated_at")
_UPDATABLE = frozenset(_COLUMNS) - {"batch_key", "run_id", "service", "endpoint", "custom_ids", "lines"}


class BatchLedger:
    """The ``batches`` rows of one store file."""

    def __init__(self, path: Path) -> None:
        """Open a connection of its own to the (migrated) store at ``path``."""
        self.conn = connect(path, read_only=False)
        self.conn.row_factory = sqlite3.Row
        self._lock = threading.Lock()

    def record(self, batch: BatchRecord) -> None:
        """Insert ``batch`` (before the provider is asked to create it)."""
        now = now_iso()
        values = {**_row_of(batch), "created_at": batch.created_at or now, "updated_at": now}
        with self._lock, immediate(self.conn):
            self.conn.execute(f"insert into batches ({', '.join(_COLUMNS)}) values "
                              f"({', '.join('?' * len(_COLUMNS))})", [values[c] for c in _COLUMNS])

    def update(self, batch_key: str, **changes: Any) -> None:
        """Change some columns of a batch (dicts are stored as JSON)."""
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        values = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in changes.items()}
        values["updated_at"] = now_iso()
        assignments = ", ".join(f"{name} = ?" for name in values)
        with self._lock, immediate(self.conn):
            self.conn.execute(f"update batches set {assignments} where batch_key = ?",
                              [*values.values(), batch_key])

    def forget(self, batch_key: str) -> None:
        """Drop a batch that was never created (its cells go to a new one)."""
        with self._lock, immediate(self.conn):
            self.conn.execute("delete from batches where batch_key = ?", [batch_key])

    def open_batches(self, services: Iterable[str]) -> list[BatchRecord]:
        """The batches of ``services`` a rerun must wait on or read (not done, not lost), but for
        those of a run still going (another process on the store polls them)."""
        names = list(services)
        if not names:
            return []
        marks = ", ".join("?" * len(names))
        sql = (f"select * from batches where service in ({marks}) and status not in ('done', 'lost')"
               " and run_id not in (select run_id from runs where status = 'running') order by created_at")
        with self._lock:
            return [BatchRecord.from_row(row) for row in self.conn.execute(sql, names)]

    def failed_cells(self, service: str) -> frozenset[str]:
        """Cells of ``service`` stored with a batch error (``batch.fallback=online`` sends them online)."""
        with self._lock:
            rows = self.conn.execute("select cell_key from results where service_name = ?"
                                     f" and error_kind like 'batch%' and {latest_version_sql()}",
                                     [service]).fetchall()
        return frozenset(row[0] for row in rows)

    def close_stored(self) -> int:
        """Mark ``done`` (and drop the kept files of) every collected batch whose cells are all stored."""
        with self._lock, immediate(self.conn):
            rows = self.conn.execute("select batch_key, custom_ids from batches"
                                     " where collected_at is not null and status != 'done'").fetchall()
            finished = [row["batch_key"] for row in rows if self._all_stored(json.loads(row["custom_ids"]))]
            self.conn.executemany("update batches set status = 'done', output = null, errors = null,"
                                  " updated_at = ? where batch_key = ?", [(now_iso(), k) for k in finished])
        return len(finished)

    def _all_stored(self, custom_ids: Sequence[str]) -> bool:
        keys = sorted({custom_id.partition("#")[0] for custom_id in custom_ids})
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            marks = ", ".join("?" * len(chunk))
            found = self.conn.execute("select count(distinct cell_key) from results"
                                      f" where cell_key in ({marks})", chunk).fetchone()[0]
            if found < len(chunk):
                return False
        return True

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def list_batches(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every batch of a store, newest first, without the kept files (for ``evalhydra batches``)."""
    has = conn.execute("select 1 from sqlite_master where type = 'table' and name = 'batches'").fetchone()
    if not has:
        return []
    columns = [c for c in _COLUMNS if c not in ("output", "errors")]
    sql = f"select {', '.join(columns)} from batches order by created_at desc, batch_key"
    rows = conn.execute(sql).fetchall()
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _row_of(batch: BatchRecord) -> dict[str, Any]:
    return {"batch_key": batch.batch_key, "run_id": batch.run_id, "service": batch.service,
            "endpoint": batch.endpoint, "api_key_env": batch.api_key_env, "status": batch.status,
            "batch_id": batch.batch_id, "input_file_id": batch.input_file_id,
            "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
            "custom_ids": json.dumps(batch.custom_ids), "lines": len(batch.custom_ids),
            "request_counts": json.dumps(batch.request_counts), "message": batch.message,
            "output": batch.output, "errors": batch.errors, "submitted_at": batch.submitted_at,
            "collected_at": batch.collected_at}
