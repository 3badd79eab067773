"""Which rows a report covers: a resumed run is read by run id, any other reuse by membership."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import evalhydra
from evalhydra.analysis.selection import Selection, select_runs, versions_of_runs
from evalhydra.store.db import open_store
from evalhydra.store.fractions import parse_digest, save_case_fractions
from tests.helpers import numbered_registry


def _run(tmp_path: Path, *extra: str) -> str:
    registry = numbered_registry(tmp_path / "reg", 4)
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                                 "report=[json]", "run.progress=false", "trials=2", *extra])
    assert result.exit_code == 0 and result.run_id
    return result.run_id


def _rows(tmp_path: Path, run_id: str,
          sel: Selection | None = None) -> tuple[Selection, set[tuple[str, str]]]:
    store = open_store(tmp_path / "s.db", read_only=True)
    try:
        sel = sel or select_runs(store.conn, [run_id])
        rows = {(key, run) for key, run in store.conn.execute(sel.source("cell_key, run_id"), sel.params)}
        return sel, rows
    finally:
        store.close()


def test_a_resumed_run_is_read_by_the_ids_of_the_runs_it_holds_whole(tmp_path: Path) -> None:
    first = _run(tmp_path, "run.limit=2")  # stops early, as a killed run does
    resumed = _run(tmp_path)
    sel, rows = _rows(tmp_path, resumed)
    assert sel.where == "run_id in (?, ?)" and set(sel.params) == {first, resumed}
    _, by_membership = _rows(tmp_path, resumed, Selection((resumed,), versions_of_runs(1), (resumed,)))
    assert rows == by_membership and len(rows) == 8
    assert {run for _, run in rows} == {first, resumed}
    store = open_store(tmp_path / "s.db", read_only=True)
    try:  # saved when the run ended: the next selection reads it instead of every membership
        sql = "select summary from run_summaries where run_id = ?"
        (saved,) = store.conn.execute(sql, [resumed]).fetchone()
    finally:
        store.close()
    assert set(json.loads(saved)["sources"]) == {first, resumed}


def test_a_run_holding_part_of_another_is_read_by_its_memberships(tmp_path: Path) -> None:
    first = _run(tmp_path)
    again = _run(tmp_path, "run.cases=[c0]")  # reuses two of the first run's eight rows
    sel, rows = _rows(tmp_path, again)
    assert sel.where == versions_of_runs(1)
    assert len(rows) == 2 and {run for _, run in rows} == {first}


def test_a_resumed_runs_fractions_read_by_run_id_equal_those_read_through_memberships(tmp_path: Path) -> None:
    first = _run(tmp_path, "run.limit=3")
    resumed = _run(tmp_path)
    store = open_store(tmp_path / "s.db")
    try:
        sql = "select * from case_fractions where run_id = ? order by case_id"
        saved = _fractions(store.conn.execute(sql, [resumed]))  # by run id: the summary names both runs
        assert len(saved) == 4 and sum(row[6] for row in saved) == 8
        for sources in ((), (first,)):  # none named, or too few rows to be the run's: memberships
            with store.conn:
                assert save_case_fractions(store.conn, resumed, sources) == 8
            assert _fractions(store.conn.execute(sql, [resumed])) == saved
    finally:
        store.close()


def _fractions(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``case_fractions`` rows, each digest parsed (its trials come in the order SQLite read them)."""
    return [(*row[:-1], parse_digest(row[-1])) for row in rows]
