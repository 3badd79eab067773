"""SQLite's allocation statistics are off in evalhydra's processes, and only when that is safe.

Each check runs in a fresh interpreter: the setting is process-wide and can
only change before the first connection.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalhydra.store import sqlite_lib
from evalhydra.store.sqlite_lib import _library


def _run(code: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=60, check=True)
    return result.stdout.split()


pytestmark = pytest.mark.skipif(_library() is None, reason="sqlite3 is not a loadable extension module here")


def test_importing_the_store_turns_statistics_off_and_stores_still_work(tmp_path):
    out = _run(f"""
        import evalhydra.store.db as db
        from evalhydra.store.sqlite_lib import memory_statistics_enabled
        store = db.open_store(db.Path({str(tmp_path / "s.db")!r}))
        store.conn.execute("create table t (x)")
        store.conn.execute("insert into t values (1), (2)")
        print(memory_statistics_enabled(), store.conn.execute("select sum(x) from t").fetchone()[0])
        store.close()
    """)
    assert out == ["False", "3"]


def test_an_open_connection_keeps_the_library_as_it_was(tmp_path):
    out = _run(f"""
        import sqlite3
        conn = sqlite3.connect({str(tmp_path / "first.db")!r})
        conn.execute("create table t (x)")
        conn.execute("insert into t values (41)")
        import evalhydra.store.db as db
        from evalhydra.store.sqlite_lib import disable_memory_statistics, memory_statistics_enabled
        print(disable_memory_statistics(), memory_statistics_enabled())
        print(conn.execute("select x + 1 from t").fetchone()[0])
        store = db.open_store(db.Path({str(tmp_path / "s.db")!r}))
        print(store.conn.execute("pragma journal_mode").fetchone()[0])
    """)
    assert out == ["False", "True", "42", "wal"]


def test_statistics_are_on_without_evalhydra():
    """The check itself tells the two states apart (the module loaded alone, not the store)."""
    path = str(Path(sqlite_lib.__file__))
    assert _run(f"""
        import importlib.util
        spec = importlib.util.spec_from_file_location("sqlite_lib", {path!r})
        sqlite_lib = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sqlite_lib)
        print(sqlite_lib.memory_statistics_enabled(), sqlite_lib.disable_memory_statistics(),
              sqlite_lib.memory_statistics_enabled())
    """) == ["True", "True", "False"]
