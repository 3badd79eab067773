"""Opening the store's SQLite file: one connection per process (WAL, a busy timeout, recursive
triggers on writers), the read-only URI, and ``BEGIN IMMEDIATE`` transactions so writers queue on
the lock instead of failing."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

__all__ = ["connect", "immediate", "read_only_uri", "use_wal"]


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
