"""Migration 17 (issue 48): a store of one result per cell upgrades in place to versioned results,
its runs keeping the rows they have; and a kill -9 at any moment of the upgrade leaves a store that
opens, the old one or the new one, never a third thing.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlite_utils

from evalhydra.analysis.selection import select_runs
from evalhydra.store.db import open_store
from evalhydra.store.rows import RESULT_FIELDS
from evalhydra.store.schema import MIGRATIONS

BEFORE = 16  # the last layout with one result per cell


def old_store(path: Path, cells: int, runs: int = 2) -> None:
    """A store as evalhydra wrote it before versions: run ``r0`` wrote every cell, each later run
    re-sent the even cells (writing over them) and reused the odd ones."""
    db = sqlite_utils.Database(path)
    with db.conn:
        for step in MIGRATIONS[:BEFORE]:
            step(db)
        db.conn.execute(f"pragma user_version = {BEFORE}")
    names = ", ".join(f'"{c}"' for c in RESULT_FIELDS)
    marks = ", ".join("?" * len(RESULT_FIELDS))
    with db.conn:
        for run in range(runs):
            db.conn.execute("insert into runs (run_id, status, started_at) values (?, 'completed', ?)",
                            [f"r{run}", f"2026-01-0{run + 1}T00:00:00Z"])
        for i in range(cells):
            writer = f"r{runs - 1}" if i % 2 == 0 else "r0"
            row = {"cell_key": f"k{i:06d}", "run_id": writer, "group": "g", "eval_id": "g.e",
                   "service_name": "s", "model": "m", "run_index": 0, "case_id": f"c{i}", "kind": "chat",
                   "status": "PASS", "passed": 1, "score": 1.0, "output": f"out {i}",
                   "evaluated_at": "2026-01-01T00:00:00Z"}
            db.conn.execute(f"insert into results ({names}) values ({marks})",
                            [row.get(c) for c in RESULT_FIELDS])
            db.conn.executemany("insert into run_cells (run_id, cell_key) values (?, ?)",
                                [(f"r{run}", f"k{i:06d}") for run in range(runs)])
    db.conn.close()


def rows_of(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("select cell_key, run_id, output from results order by cell_key").fetchall()
    finally:
        conn.close()


def test_an_old_store_upgrades_in_place_and_its_runs_keep_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_store(path, 40)
    before = rows_of(path)
    store = open_store(path)
    assert store.conn.execute("pragma user_version").fetchone()[0] == len(MIGRATIONS)
    assert rows_of(path) == before  # every row kept, as it was
    for run in ("r0", "r1"):  # each run's view: the cell rows it had before the upgrade
        sel = select_runs(store.conn, [run])
        got = store.conn.execute(f"select count(*) from {sel.table} where {sel.where}", sel.params)
        assert got.fetchone()[0] == 40
    links = store.conn.execute("select count(*) from run_cells where result_run_id is null").fetchone()[0]
    triggers = store.conn.execute("select count(*) from sqlite_master where type = 'trigger'").fetchone()[0]
    store.close()
    assert links == 0 and triggers == 0


MIGRATE = "import sys; from evalhydra.store.db import open_store; open_store(sys.argv[1]).close()"


def layout(path: Path) -> tuple[int, bool]:
    """The store's schema version, and whether it passes SQLite's integrity check."""
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("pragma user_version").fetchone()[0]
        intact = conn.execute("pragma integrity_check").fetchone()[0] == "ok"
        return version, intact
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.05, 0.2, 0.4, 0.8, 1.5])
def test_a_kill_9_during_the_upgrade_leaves_the_old_store_or_the_new(tmp_path: Path, after_s: float) -> None:
    path = tmp_path / "big.db"
    old_store(path, 60_000)
    before = rows_of(path)
    proc = subprocess.Popen([sys.executable, "-c", MIGRATE, str(path)])
    time.sleep(after_s)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    version, intact = layout(path)
    assert intact and version in (BEFORE, len(MIGRATIONS))  # the old store, or the new one
    assert rows_of(path) == before
    open_store(path).close()  # and the upgrade completes on the next open
    assert layout(path) == (len(MIGRATIONS), True) and rows_of(path) == before
