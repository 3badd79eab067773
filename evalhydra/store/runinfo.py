"""How a ``runs`` row reads to a person: its status (a dead process's run is interrupted), whether
it ran only part of its cases, and its wall time. One place, so ``evalhydra runs``, the viewer and
the reports say the same."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from evalhydra.store.db import process_gone

__all__ = ["GONE", "selection_of", "shown_status", "wall_seconds"]

#: How a run left ``running`` by a process of this host that is gone is shown.
GONE = "interrupted (process gone)"


def shown_status(status: str | None, hostname: str | None, pid: int | None) -> str:
    """The status to show: a ``running`` run whose process is gone is interrupted (the store is
    left as it is: a reader writes nothing; the next writer marks it)."""
    return GONE if status == "running" and process_gone(hostname, pid) else str(status or "")


def selection_of(config: str | None) -> str:
    """What part of its cases a run ran, as the overrides that chose it (``run.limit=3``,
    ``run.cases=[a,b]``, ``run.tags=[x]``, ``shard 1/4``, ``run.rerun=failed``); "" for a whole run
    (or a config that is not JSON)."""
    try:
        run = json.loads(config or "{}").get("run") or {}
    except (ValueError, AttributeError):
        return ""
    if not isinstance(run, dict):
        return ""
    parts = []
    if run.get("limit") is not None:
        parts.append(f"run.limit={run['limit']}")
    for key in ("cases", "tags"):
        if run.get(key):
            parts.append(f"run.{key}=[{','.join(map(str, run[key]))}]")
    if isinstance(run.get("shard_count"), int) and run["shard_count"] > 1:
        parts.append(f"shard {int(run.get('shard_index') or 0) + 1}/{run['shard_count']}")
    if run.get("rerun"):
        parts.append(f"run.rerun={run['rerun']}")
    return " ".join(parts)


def wall_seconds(runs: Sequence[Mapping[str, Any]]) -> float | None:
    """Seconds from the first run's start to the last one's finish (None while any is unfinished)."""
    try:
        started = min(datetime.fromisoformat(r["started_at"]) for r in runs)
        finished = max(datetime.fromisoformat(r["finished_at"]) for r in runs)
    except (KeyError, TypeError, ValueError):  # unfinished (None), or no runs
        return None
    return max(0.0, (finished - started).total_seconds())
