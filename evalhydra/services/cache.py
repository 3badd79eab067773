"""The response cache: the same request to the same model is not paid for twice.

One SQLite file (``cache.path``, by default ``$XDG_CACHE_HOME/evalhydra/responses.db``) shared by
every store, run and branch, in WAL mode so concurrent runs read and write it safely and a run
killed mid-write leaves it usable. An entry is keyed by a SHA-256 over everything that decides a
reply (:func:`cache_key`): the endpoint, the model, the whole request body as sent (messages,
every parameter, tools), the service's system prompt and the **trial index**, so trial k of a
case is cached as trial k and repeated trials stay independent samples. No API key or header
value is part of the key or stored. An entry holds the parsed answer, the model the endpoint
named, its usage and its original latency. Writes are batched (:data:`BATCH`), one transaction
per batch; entries older than ``cache.expiry`` are misses, and ``evalhydra cache prune``
deletes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError

__all__ = ["BATCH", "TRIAL", "USE_CACHE", "CacheEntry", "ResponseCache", "cache_key", "cache_stats",
           "default_cache_path", "parse_expiry", "prune"]

#: The trial index of the cell a task is running (set by the chat cell runner): the cache keys
#: the candidate's request and its judges' by it, so trials stay independent samples.
TRIAL: ContextVar[int | None] = ContextVar("evalhydra_trial", default=None)
#: False while a call must not use the cache (a judge's, with ``cache.judge=false``).
USE_CACHE: ContextVar[bool] = ContextVar("evalhydra_use_cache", default=True)

#: Entries written in one transaction (and the most a killed run can lose).
BATCH = 32

_SCHEMA = """create table if not exists responses (
  key text primary key, created real not null, endpoint text, model text, entry text not null)"""
_EXPIRY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_EXPIRY_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def default_cache_path() -> Path:
    """``$XDG_CACHE_HOME/evalhydra/responses.db`` (``~/.cache/…`` without it)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "evalhydra" / "responses.db"


def parse_expiry(text: str | float | int) -> float:
    """Seconds of a ``cache.expiry``: ``7d``, ``12h``, ``30m``, ``2w``, or seconds.

    Raises:
        EvalHydraError: For anything else.
    """
    match = _EXPIRY.match(str(text))
    if match is None:
        raise EvalHydraError(f"cache.expiry={text!r} is not a duration.",
                             "Write it as seconds or with a unit: cache.expiry=7d (also s, m, h, w).")
    return float(match.group(1)) * _EXPIRY_S[match.group(2)]


def cache_key(endpoint: str, model: str, body: bytes, trial: int | None, system_prompt: str | None) -> str:
    """The hash naming one reply: endpoint, model, the body as sent, trial index, system prompt."""
    digest = hashlib.sha256()
    for part in (endpoint, model, str(trial), system_prompt or ""):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\x1f")
    digest.update(body)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """A cached reply: its answer as :meth:`ResponseCache.get` returns it."""

    answer: dict[str, Any]
    latency_ms: float
    created: float


class ResponseCache:
    """The cache file, opened for one service of one run.

    Args:
        path: The SQLite file (made, with its folder, when missing).
        expiry_s: Entries older than this are misses.

    Raises:
        EvalHydraError: A path that cannot hold the cache.
    """

    def __init__(self, path: Path, expiry_s: float) -> None:
        self.path = path
        self.expiry_s = expiry_s
        self.hits = 0
        self._pending: list[tuple[str, float, str, str, str]] = []
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            self._conn.execute("pragma journal_mode=wal")
            self._conn.execute("pragma synchronous=normal")
            self._conn.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise EvalHydraError(f"cache.path={path}: cannot open the response cache: {exc}",
                                 "Point cache.path at a writable file, or set cache.enabled=false.") from None

    def get(self, key: str) -> CacheEntry | None:
        """The entry under ``key`` unless it is missing or expired."""
        row = self._conn.execute("select created, entry from responses where key = ?", (key,)).fetchone()
        if row is None or time.time() - row[0] > self.expiry_s:
            return None
        data = json.loads(row[1])
        self.hits += 1
        return CacheEntry(data["answer"], float(data["latency_ms"]), float(row[0]))

    def put(self, key: str, endpoint: str, model: str, answer: dict[str, Any], latency_ms: float) -> None:
        """Keep a reply (written with the next batch, or at :meth:`close`)."""
        entry = json.dumps({"answer": answer, "latency_ms": latency_ms}, ensure_ascii=False)
        self._pending.append((key, time.time(), endpoint, model, entry))
        if len(self._pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the pending entries in one transaction."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        with self._conn:
            self._conn.execute("begin immediate")
            self._conn.executemany("insert or replace into responses values (?, ?, ?, ?, ?)", pending)

    def close(self) -> None:
        """Write what is pending and close the file."""
        try:
            self.flush()
        finally:
            self._conn.close()


def cache_stats(path: Path) -> dict[str, Any]:
    """Entries, bytes and the oldest and newest entry of a cache file, and entries per model."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        count, oldest, newest = conn.execute(
            "select count(*), min(created), max(created) from responses").fetchone()
        models = conn.execute(
            "select endpoint, model, count(*) from responses group by 1, 2 order by 3 desc").fetchall()
    finally:
        conn.close()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
    return {"path": str(path), "entries": count, "bytes": size, "oldest": oldest, "newest": newest,
            "by_model": [{"endpoint": e, "model": m, "entries": n} for e, m, n in models]}


def prune(path: Path, expiry_s: float | None) -> int:
    """Delete the entries older than ``expiry_s`` (all of them with None); return how many."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        conn.execute("pragma journal_mode=wal")
        if expiry_s is None:
            deleted = conn.execute("delete from responses").rowcount
        else:
            cutoff = time.time() - expiry_s
            deleted = conn.execute("delete from responses where created < ?", (cutoff,)).rowcount
        conn.execute("vacuum")
    finally:
        conn.close()
    return int(deleted)
