"""Merging shard stores (one per job or machine) into one store, exactly."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from evalhydra.store.db import immediate, open_store

__all__ = ["merge_stores"]


def merge_stores(target: Path, shards: Iterable[Path]) -> int:
    """Merge shard stores (e.g. one per SLURM job) into ``target`` exactly.

    Results are keyed by cell, so merging twice, or merging overlapping shards,
    never duplicates a result. Returns the number of result rows in ``target``.
    """
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
