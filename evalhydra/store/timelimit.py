"""A time limit on a connection's statements: SQLite's progress handler interrupts any statement
still running past it (``sqlite3.OperationalError: interrupted``). One helper for every reader a
person waits on: ``evalhydra query``, ``merge``'s shard checks, the viewer's pages."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["interrupted", "time_limit"]

#: How many SQLite virtual-machine steps pass between looks at the clock (a few milliseconds of
#: SQLite's work, so a limit is kept to within that). Each look is a Python call that must take
#: the GIL, which the viewer's page threads and event loop share: few looks, little waiting.
_STEPS = 1_000_000


@contextmanager
def time_limit(conn: sqlite3.Connection, seconds: float) -> Iterator[None]:
    """Interrupt ``conn``'s statements once ``seconds`` have passed from entering; the limit is
    lifted on leaving."""
    deadline = time.monotonic() + seconds
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _STEPS)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is a statement stopped by :func:`time_limit`."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted"
