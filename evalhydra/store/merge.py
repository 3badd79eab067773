"""Merging shard stores (one per job or machine) into one store, exactly."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from evalhydra.core.errors import EvalHydraError
from evalhydra.store.db import immediate, open_store
from evalhydra.store.rows import RESULT_FIELDS, infra_error_sql
from evalhydra.store.schema import SCHEMA_VERSION

__all__ = ["merge_stores"]


def merge_stores(target: Path, shards: Iterable[Path]) -> int:
    """Merge shard stores (e.g. one per SLURM job) into ``target`` exactly.

    Results are keyed by cell, so merging twice, or merging overlapping shards,
    never duplicates a result. When two shards hold the same cell the order of
    the shards does not matter: a scored result beats an infrastructure error,
    then the later ``evaluated_at`` (then the larger run id) wins. Runs, their
    cell links and attempts are kept. Returns the number of result rows in ``target``.
    """
    shards = list(shards)
    for shard in shards:  # every shard must be a readable store before the target is touched
        _check_shard(shard)
    store = open_store(target)
    try:
        for shard in shards:
            store.conn.execute("attach database ? as shard", (str(shard),))
            with immediate(store.conn):
                for table in ("runs", "run_cells", "attempts"):
                    store.conn.execute(f"insert or ignore into main.{table} select * from shard.{table}")
                store.conn.execute(_MERGE_RESULTS)
            store.conn.execute("detach database shard")
        return int(store.conn.execute("select count(*) from results").fetchone()[0])
    finally:
        store.close()


_COLUMNS = ", ".join(f'"{c}"' for c in RESULT_FIELDS)
_EXCLUDED = ", ".join(f'excluded."{c}"' for c in RESULT_FIELDS)
#: The shard's row replaces the target's when it ranks higher: scored over error, then later, then run id.
_MERGE_RESULTS = f"""
    insert into main.results ({_COLUMNS}) select {_COLUMNS} from shard.results where true
    on conflict (cell_key) do update set ({_COLUMNS}) = ({_EXCLUDED})
    where (not {infra_error_sql("excluded.")}, coalesce(excluded.evaluated_at, ''), excluded.run_id)
        > (not {infra_error_sql("results.")}, coalesce(results.evaluated_at, ''), results.run_id)"""


def _check_shard(shard: Path) -> None:
    """A shard must be an intact store of this schema version.

    Raises:
        EvalHydraError: Naming the shard and what is wrong with it.
    """
    store = open_store(shard, read_only=True)  # refuses a file that is not SQLite
    try:
        version = int(store.conn.execute("pragma user_version").fetchone()[0])
        store.conn.execute("select count(*) from results").fetchone()
    except sqlite3.DatabaseError as exc:
        raise EvalHydraError(f"shard {shard}: not an intact store ({exc}).",
                             "The file is not an intact SQLite store; leave it out of the merge.") from None
    finally:
        store.close()
    if version != SCHEMA_VERSION:
        raise EvalHydraError(
            f"shard {shard}: schema version {version}, but this evalhydra writes {SCHEMA_VERSION}.",
            f"Upgrade it first (evalhydra runs --store {shard} migrates an older store), "
            "or merge with the evalhydra that wrote it.")
