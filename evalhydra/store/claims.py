"""Cell claims: one cell, one request, however many processes share a store.

Before a run sends a cell it claims it in the ``claims`` table, in the same
transaction that checks the cell is still unstored. A claim holds until the
store writer stores the cell's result, in that same transaction
(:meth:`~evalhydra.store.db.Store.write`), so at every moment a cell is
either claimed or stored; an infrastructure error's claim, and those of cells
never finished, hold until the run ends (the run renews its lease while it
lasts). A second invocation on the same store skips the cells the first one is
sending or has sent, and sends only what nobody holds. The table holds only
cells in flight: the lease renewals and the release at the end touch those, not
every cell of the run. A claim whose lease ran out (its process died on another host) can be
taken over; on this host, opening the store for writing releases the claims of
runs whose process is gone at once (:meth:`~evalhydra.store.db.Store._close_abandoned_runs`).

Claims have their own connection: they are written from the producer task's
thread while the store writer commits results on its own connection.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evalhydra.store.connection import connect, immediate
from evalhydra.store.inserts import insert_rows
from evalhydra.store.rows import INFRA_ERROR_SQL
from evalhydra.store.views import latest_version_sql

__all__ = ["LEASE_S", "ClaimResult", "Claims"]

#: How long a claim holds without renewal; a run renews it every third of this.
LEASE_S = 60.0
#: Keys per ``IN (...)`` list (well under SQLite's variable limit).
_KEYS_PER_STATEMENT = 500


@dataclass
class ClaimResult:
    """What one claim call found for its keys."""

    claimed: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)  # cell key → the run holding it


class Claims:
    """The claims of one run on one store file."""

    def __init__(self, path: Path, run_id: str, started_at: str, *, resend_errors: bool,
                 fresh: bool = False, lease_s: float = LEASE_S) -> None:
        """Open a connection of its own to the store at ``path``.

        Args:
            path: The store file (already migrated).
            run_id: The run that claims.
            started_at: The run's start (ISO); a result stored since then by another run
                is never sent again, error or not.
            resend_errors: Whether stored infrastructure errors from earlier runs are sent again.
            fresh: Whether every result stored before ``started_at`` is sent again
                (``run.fresh``, ``run.rerun=failed``).
            lease_s: How long a claim holds without renewal.
        """
        self.run_id = run_id
        self.started_at = started_at
        self.resend_errors = resend_errors
        self.fresh = fresh
        self.lease_s = lease_s
        self.conn: sqlite3.Connection = connect(path, read_only=False)
        self._lock = threading.Lock()  # claim and renew run in different threads
        self._closed = threading.Event()
        self._renewer: threading.Thread | None = None

    def claim(self, keys: Sequence[str]) -> ClaimResult:
        """Claim those of ``keys`` that are neither stored nor held by another live run."""
        result = ClaimResult()
        if not keys:
            return result
        now = time.time()
        with self._lock, immediate(self.conn):
            stored = self._stored(keys)
            pending = [k for k in keys if k not in stored]
            expires = now + self.lease_s
            insert_rows(self.conn, "insert into claims (run_id, expires_at, cell_key) values ",
                        [(key,) for key in pending],
                        " on conflict (cell_key) do update set run_id = excluded.run_id, "
                        "expires_at = excluded.expires_at where claims.expires_at < ?", [now],
                        shared=[self.run_id, expires])
            held = self._held_by_others(pending)
        result.stored = [k for k in keys if k in stored]
        for key in pending:
            holder = held.get(key)
            if holder is None:
                result.claimed.append(key)
            else:
                result.held[key] = holder
        return result

    def renew(self) -> None:
        """Extend the lease of every claim this run holds."""
        with self._lock, immediate(self.conn):
            self.conn.execute("update claims set expires_at = ? where run_id = ?",
                              [time.time() + self.lease_s, self.run_id])

    def release(self) -> None:
        """Drop this run's remaining claims (errors, and cells it did not finish: free for the next run)."""
        with self._lock, immediate(self.conn):
            self.conn.execute("delete from claims where run_id = ?", [self.run_id])

    def start_renewing(self) -> None:
        """Renew the lease every third of it from a daemon thread until :meth:`close`.

        A thread, not a trio task: the renewals must go on whatever the event loop
        is doing, and they add no timers to it (trio's ``MockClock`` would jump to them).
        """
        self._renewer = threading.Thread(target=self._renew_until_closed, name="evalhydra-claims",
                                         daemon=True)
        self._renewer.start()

    def _renew_until_closed(self) -> None:
        while not self._closed.wait(self.lease_s / 3):
            try:
                self.renew()
            except sqlite3.Error:
                return  # the connection is closing; the run is over

    def close(self) -> None:
        """Stop renewing and close the connection."""
        self._closed.set()
        if self._renewer is not None:
            self._renewer.join()
        self.conn.close()

    # Each statement below returns one row, whatever the number of keys: every SQLite step
    # releases and retakes the GIL, and from this thread, behind a busy event loop, a retake
    # can wait up to the switch interval. A claim's round trip is set by the event loop's
    # scheduling batches, not by these statements, which is why the producer claims more
    # cells a trip.

    def _stored(self, keys: Sequence[str]) -> set[str]:
        """Keys with a result that counts as done for this run."""
        condition = f" and {latest_version_sql()}"
        params: list[object] = []
        if self.fresh:
            condition += " and evaluated_at >= ?"
            params = [self.started_at]
        elif self.resend_errors:
            condition += f" and (not {INFRA_ERROR_SQL} or evaluated_at >= ?)"
            params = [self.started_at]
        found: set[str] = set()
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            sql = f"select json_group_array(cell_key) from results where cell_key in ({marks}){condition}"
            found.update(json.loads(self.conn.execute(sql, [*chunk, *params]).fetchone()[0]))
        return found

    def _held_by_others(self, keys: Sequence[str]) -> dict[str, str]:
        """Of ``keys``, those another run holds, with the holder."""
        held: dict[str, str] = {}
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            sql = (f"select json_group_object(cell_key, run_id) from claims "
                   f"where cell_key in ({marks}) and run_id != ?")
            held.update(json.loads(self.conn.execute(sql, [*chunk, self.run_id]).fetchone()[0]))
        return held


def _chunks(keys: Sequence[str]) -> list[Sequence[str]]:
    return [keys[i:i + _KEYS_PER_STATEMENT] for i in range(0, len(keys), _KEYS_PER_STATEMENT)]
