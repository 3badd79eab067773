"""Merging shard stores (one per job or machine) into one store, exactly."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from evalhydra.core.errors import EvalHydraError
from evalhydra.store.db import immediate, open_store
from evalhydra.store.rows import RESULT_FIELDS, infra_error_sql
from evalhydra.store.schema import RESULT_COLUMNS, SCHEMA_VERSION
from evalhydra.store.timelimit import interrupted, time_limit

__all__ = ["SHARD_TIME_LIMIT_S", "TABLES", "check_shard", "merge_stores"]


#: The tables a shard brings, each copied by its column names.
TABLES = ("runs", "run_cells", "attempts", "results")
#: Seconds one shard's checks, or its copy, may take before the merge gives up on it.
SHARD_TIME_LIMIT_S = 600.0


def merge_stores(target: Path, shards: Iterable[Path], *,
                 time_limit_s: float = SHARD_TIME_LIMIT_S) -> int:
    """Merge shard stores (e.g. one per SLURM job) into ``target`` exactly.

    Results are versions keyed by (cell, run that wrote it), so merging twice, or
    merging overlapping shards, never duplicates one; every run's versions are
    kept, and each run's membership names the version it held. When two shards
    hold the same run's version of a cell the order of the shards does not
    matter: a scored result beats an infrastructure error, then the later
    ``evaluated_at`` wins. Runs, their cell links and attempts are kept.
    Every shard is checked before the target is touched (:func:`check_shard`).
    Returns the number of result rows (versions) in ``target``.

    Raises:
        EvalHydraError: Naming the shard and what is wrong with it.
    """
    shards = list(shards)
    for shard in shards:  # every shard must be an intact store before the target is touched
        check_shard(shard, time_limit_s)
    store = open_store(target)
    try:
        columns = {table: _columns(store.conn, "main", table) for table in TABLES}
        for shard in shards:
            store.conn.execute("attach database ? as shard", (str(shard),))
            try:
                for table in TABLES:
                    missing = sorted(set(columns[table]) - set(_columns(store.conn, "shard", table)))
                    if missing:
                        raise EvalHydraError(f"shard {shard}: {table} lacks the column {missing[0]}.",
                                             _NOT_A_SHARD)
                with _time_limit(store.conn, time_limit_s, shard), immediate(store.conn):
                    for table in ("runs", "run_cells", "attempts"):
                        names = ", ".join(f'"{c}"' for c in columns[table])
                        store.conn.execute(f"insert or ignore into main.{table} ({names})"
                                           f" select {names} from shard.{table}")
                    store.conn.execute(_STALE_SUMMARIES)  # a version both hold may be replaced
                    store.conn.execute(_MERGE_RESULTS)
            finally:
                store.conn.execute("detach database shard")
        return int(store.conn.execute("select count(*) from results").fetchone()[0])
    finally:
        store.close()


_COLUMNS = ", ".join(f'"{c}"' for c in RESULT_FIELDS)
_EXCLUDED = ", ".join(f'excluded."{c}"' for c in RESULT_FIELDS)
#: A version both hold (one run's row of one cell): the shard's replaces the target's when it ranks
#: higher, scored over error, then later.
_MERGE_RESULTS = f"""
    insert into main.results ({_COLUMNS}) select {_COLUMNS} from shard.results where true
    on conflict (cell_key, run_id) do update set ({_COLUMNS}) = ({_EXCLUDED})
    where (not {infra_error_sql("excluded.")}, coalesce(excluded.evaluated_at, ''), excluded.run_id)
        > (not {infra_error_sql("results.")}, coalesce(results.evaluated_at, ''), results.run_id)"""

#: Saved summaries of the runs whose versions the shard also holds (the merge may rank its row higher).
_STALE_SUMMARIES = """delete from main.run_summaries where run_id in (select s.run_id from shard.results s
    join main.results m on m.cell_key = s.cell_key and m.run_id = s.run_id)"""
_NOT_A_SHARD = "A shard is a store evalhydra wrote; leave this file out of the merge."
#: ``results`` columns that hold numbers, and those that hold text: a shard holding text in a
#: number column, or bytes in a text one, is refused (reports would fail on it).
_NUMERIC = tuple(name for name, kind in RESULT_COLUMNS.items() if kind in (int, float))
_TEXT = tuple(name for name, kind in RESULT_COLUMNS.items() if kind is str)


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"pragma {schema}.table_info({table})")]


@contextmanager
def _time_limit(conn: sqlite3.Connection, seconds: float, shard: Path) -> Iterator[None]:
    """Interrupt ``conn``'s statements after ``seconds``; say which shard took too long."""
    try:
        with time_limit(conn, seconds):
            yield
    except sqlite3.OperationalError as exc:
        if not interrupted(exc):
            raise
        raise EvalHydraError(f"shard {shard}: still being read after {seconds:g} s; stopped.",
                             "Check the shard (sqlite3 SHARD 'pragma integrity_check') and merge the "
                             "others.") from None


def check_shard(shard: Path, time_limit_s: float = SHARD_TIME_LIMIT_S) -> None:
    """A shard must be an intact store of this schema version: ``pragma quick_check`` passes,
    its four tables are tables (not views) with every column this version writes, and its
    results hold numbers where numbers belong.

    Raises:
        EvalHydraError: Naming the shard and what is wrong with it.
    """
    store = open_store(shard, read_only=True)  # refuses a file that is not SQLite
    try:
        with _time_limit(store.conn, time_limit_s, shard):
            _check_intact(store.conn, shard)
            _check_shape(store.conn, shard)
            _check_types(store.conn, shard)
    except sqlite3.DatabaseError as exc:
        raise EvalHydraError(f"shard {shard}: not an intact store ({exc}).",
                             "The file is not an intact SQLite store; leave it out of the merge.") from None
    finally:
        store.close()


def _check_intact(conn: sqlite3.Connection, shard: Path) -> None:
    version = int(conn.execute("pragma user_version").fetchone()[0])
    if version != SCHEMA_VERSION:
        raise EvalHydraError(
            f"shard {shard}: schema version {version}, but this evalhydra writes {SCHEMA_VERSION}.",
            f"Upgrade it first (evalhydra runs --store {shard} migrates an older store), "
            "or merge with the evalhydra that wrote it.")
    problems = [row[0] for row in conn.execute("pragma quick_check")]
    if problems != ["ok"]:
        raise EvalHydraError(f"shard {shard}: damaged ({problems[0]}).",
                             "Leave it out of the merge, or restore it from a copy.")


def _check_shape(conn: sqlite3.Connection, shard: Path) -> None:
    expected = {"runs": None, "run_cells": {"run_id", "cell_key", "result_run_id"}, "attempts": None,
                "results": set(RESULT_FIELDS)}
    for table, needed in expected.items():
        kind = conn.execute("select type from sqlite_master where name = ?", [table]).fetchone()
        if not kind or kind[0] != "table":
            what = f"a {kind[0]}" if kind else "missing"
            raise EvalHydraError(f"shard {shard}: {table} is {what}, not a table.", _NOT_A_SHARD)
        missing = sorted((needed or set()) - set(_columns(conn, "main", table)))
        if missing:
            raise EvalHydraError(f"shard {shard}: {table} lacks the column {missing[0]}.", _NOT_A_SHARD)


def _check_types(conn: sqlite3.Connection, shard: Path) -> None:
    counts = [f"sum(typeof(\"{c}\") not in ('integer', 'real', 'null'))" for c in _NUMERIC]
    counts += [f"sum(typeof(\"{c}\") = 'blob')" for c in _TEXT]
    row = conn.execute(f"select {', '.join(counts)} from results").fetchone()
    for name, bad, what in zip((*_NUMERIC, *_TEXT), row, ["text"] * len(_NUMERIC) + ["bytes"] * len(_TEXT),
                               strict=True):
        if bad:
            raise EvalHydraError(f"shard {shard}: results.{name} holds {what} in {bad} row(s).", _NOT_A_SHARD)
