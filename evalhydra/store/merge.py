"""Merging shard stores (one per job or machine) into one store, exactly."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from evalhydra.errors import EvalHydraError
from evalhydra.store.db import immediate, open_store
from evalhydra.store.schema import SCHEMA_VERSION

__all__ = ["merge_stores"]


def merge_stores(target: Path, shards: Iterable[Path]) -> int:
    """Merge shard stores (e.g. one per SLURM job) into ``target`` exactly.

    Results are keyed by cell, so merging twice, or merging overlapping shards,
    never duplicates a result. Returns the number of result rows in ``target``.
    """
    shards = list(shards)
    for shard in shards:  # every shard must be a readable store before the target is touched
        _check_shard(shard)
    store = open_store(target)
    try:
        for shard in shards:
            store.conn.execute("attach database ? as shard", (str(shard),))
            with immediate(store.conn):
                for table in ("runs", "results", "run_cells", "attempts"):
                    store.conn.execute(f"insert or ignore into main.{table} select * from shard.{table}")
            store.conn.execute("detach database shard")
        return int(store.conn.execute("select count(*) from results").fetchone()[0])
    finally:
        store.close()


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
