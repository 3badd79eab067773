"""Process-wide settings of the SQLite library: no memory statistics.

SQLite counts every allocation it makes (``SQLITE_CONFIG_MEMSTATUS``, on by
default) under one global mutex. The count serves ``sqlite3_memory_used`` and
the soft heap limit, neither of which Python's :mod:`sqlite3` or evalhydra uses,
and it costs: the count slows every SQLite-bound report, and the mutex keeps two
report threads on their own connections from running twice as fast as one
(``bench/report_scale.py``).

The setting can only change while the library is shut down, and shutting it
down is safe only with no connection open. Python's :mod:`sqlite3` initialises
the library on import, so :func:`disable_memory_statistics` reconfigures it only
when SQLite holds no memory at all (no connection, no statement: it counts that
too) and otherwise leaves it as it is; either way queries give the same results.
"""

from __future__ import annotations

import _sqlite3  # the extension module: its handle resolves the SQLite library it calls
import ctypes
import sqlite3

__all__ = ["disable_memory_statistics", "memory_statistics_enabled"]

_SQLITE_OK = 0
_SQLITE_CONFIG_MEMSTATUS = 9
_SQLITE_STATUS_MEMORY_USED = 0


def _library() -> ctypes.CDLL | None:
    """The SQLite library that :mod:`sqlite3` calls (None where it cannot be reached)."""
    path = getattr(_sqlite3, "__file__", None)  # None where the module is built into Python
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    needed = ("sqlite3_status64", "sqlite3_config", "sqlite3_shutdown", "sqlite3_initialize")
    return lib if all(hasattr(lib, name) for name in needed) else None  # e.g. linked in, not exported


def _memory_used(lib: ctypes.CDLL) -> int:
    current, highest = ctypes.c_int64(), ctypes.c_int64()
    rc = lib.sqlite3_status64(_SQLITE_STATUS_MEMORY_USED, ctypes.byref(current), ctypes.byref(highest), 0)
    return current.value if rc == _SQLITE_OK else -1


def memory_statistics_enabled() -> bool | None:
    """Whether SQLite counts its allocations in this process (None if it cannot be asked).

    With statistics off SQLite reports no memory in use, so the check opens a
    connection and looks.
    """
    lib = _library()
    if lib is None:
        return None
    conn = sqlite3.connect(":memory:")
    try:
        return _memory_used(lib) > 0
    finally:
        conn.close()


def disable_memory_statistics() -> bool:
    """Turn SQLite's allocation statistics off if no connection is open; return whether it did.

    Call it before the process opens its first connection. Not thread-safe: no
    other thread may use SQLite while it runs (at import time, none does).
    """
    lib = _library()
    if lib is None or _memory_used(lib) != 0:
        return False
    if lib.sqlite3_shutdown() != _SQLITE_OK:
        return False
    configured = lib.sqlite3_config(_SQLITE_CONFIG_MEMSTATUS, ctypes.c_int(0)) == _SQLITE_OK
    if lib.sqlite3_initialize() != _SQLITE_OK:  # as sqlite3's import left it; the first open retries
        return False
    return configured
