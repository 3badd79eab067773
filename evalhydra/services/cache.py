"""The response cache: the same request to the same model is not paid for twice.

One SQLite file (``cache.path``, by default ``$XDG_CACHE_HOME/evalhydra/responses.db``) shared by
every store, run and branch, in WAL mode so concurrent runs read and write it safely and a run
killed mid-write leaves it usable. An entry is keyed by a SHA-256 over everything that decides a
reply (:func:`cache_key`): the endpoint's whole URL with its query string, the model, the whole
request body as sent (messages, every parameter, tools), the service's system prompt, every
header value sent but the API key's, how the reply is read (``service.reasoning``) and the
**trial index**, so trial k of a case is cached as trial k and repeated trials stay independent
samples. Those values are only hashed: none is stored. The API key is not part of the key, so
two keys of one account share their entries (by design: the key pays for an answer, it does not
change it). An entry holds the parsed answer, the model the endpoint named, its usage and its
original latency. Writes are batched (:data:`BATCH`), one transaction per batch on a worker
thread; entries older than ``cache.expiry`` are misses, and ``evalhydra cache prune`` deletes
them. The file's layout is versioned (``pragma user_version``): a newer one is refused at open.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.strictjson import loads_plain
from evalhydra.store.connection import use_wal

__all__ = ["BATCH", "CACHE_SCHEMA_VERSION", "CacheEntry", "ResponseCache", "cache_key",
           "cache_stats", "default_cache_path", "parse_expiry", "prune", "request_scope"]

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


def cache_key(endpoint: str, model: str, body: bytes, trial: int | None, system_prompt: str | None,
              scope: Sequence[str] = ()) -> str:
    """The hash naming one reply: endpoint, model, the body as sent, trial index, system prompt,
    and ``scope``: whatever else decides the answer a request gets (:func:`request_scope`)."""
    digest = hashlib.sha256()
    for part in (endpoint, model, str(trial), system_prompt or "", *scope):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\x1f")
    digest.update(body)
    return digest.hexdigest()


def request_scope(url: str, headers: dict[str, str], reasoning_parse: bool,
                  reasoning_tags: Sequence[str]) -> list[str]:
    """What besides the body decides a cached answer: the whole URL (query string included), every
    header value sent but the API key's, and how the reply is read (``service.reasoning``). Only its
    hash is kept: no value here is stored."""
    return [url, *(f"{name.lower()}:{value}" for name, value in sorted(headers.items())),
            f"reasoning.parse={reasoning_parse}", *reasoning_tags]


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """A cached reply: its answer as :meth:`ResponseCache.get` returns it."""

    answer: dict[str, Any]
    latency_ms: float
    created: float


#: The cache file's layout (``pragma user_version``); a file of another is refused at open.
CACHE_SCHEMA_VERSION = 1
#: The longest opening waits for another process that is making the file.
OPEN_TIMEOUT_S = 30.0
#: The longest a write waits for another process's lock before its entries are dropped (warned).
WRITE_TIMEOUT_S = 2.0
#: The longest a read waits (a reader in WAL mode waits only while the file is being recovered).
READ_TIMEOUT_S = 0.5
#: The largest entry read back: three times a reply's cap (``MAX_RESPONSE_BYTES`` of the chat
#: service, which imports this module), as an answer's JSON escapes add to it.
MAX_ENTRY_CHARS = 24 << 20


class ResponseCache:
    """The cache file, opened for one service of one run.

    The cache only saves calls, so its trouble never stops a run: an entry that does not read
    (not JSON, the wrong shape, a text ``created``, past :data:`MAX_ENTRY_CHARS`) is a miss, a
    file another process keeps locked loses this batch of writes, and each kind of trouble is
    warned about once. Writes run on a worker thread (:meth:`aflush`), never on the event loop.

    Args:
        path: The SQLite file (made, with its folder, when missing).
        expiry_s: Entries older than this are misses.

    Raises:
        EvalHydraError: A path that cannot hold the cache, or a file of another layout (a newer
            evalhydra's, or no cache at all).
    """

    def __init__(self, path: Path, expiry_s: float) -> None:
        self.path = path
        self.expiry_s = expiry_s
        self.hits = 0
        self._pending: list[tuple[str, float, str, str, str]] = []
        self._warned: set[str] = set()
        self._write_lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Opening may wait for another process making the file (WAL mode, the table): as long
            # as a store would. Afterwards a write waits WRITE_TIMEOUT_S, a read READ_TIMEOUT_S.
            self._conn = _connect(path, OPEN_TIMEOUT_S)
            _check_layout(self._conn, path)
            self._conn.execute(f"pragma busy_timeout = {int(WRITE_TIMEOUT_S * 1000)}")
            self._reader = _connect(path, OPEN_TIMEOUT_S)
            self._reader.execute(f"pragma busy_timeout = {int(READ_TIMEOUT_S * 1000)}")
        except (OSError, sqlite3.Error) as exc:
            raise EvalHydraError(f"cache.path={path}: cannot open the response cache: {exc}",
                                 "Point cache.path at a writable file, or set cache.enabled=false.") from None

    def get(self, key: str) -> CacheEntry | None:
        """The entry under ``key`` unless it is missing, expired or unreadable."""
        try:
            row = self._reader.execute("select created, entry from responses where key = ?",
                                       (key,)).fetchone()
        except sqlite3.Error as exc:
            self.warn("read", f"cannot read the response cache ({exc}); these calls are sent")
            return None
        if row is None:
            return None
        entry = _entry(row)
        if entry is None:
            self.unreadable()
            return None
        if time.time() - entry.created > self.expiry_s:
            return None
        self.hits += 1
        return entry

    def unreadable(self) -> None:
        """Note an entry that does not read (warned once): it is a miss, and a fresh answer replaces it."""
        self.warn("entry", "an entry of the response cache does not read; it is sent again and replaced")

    def warn(self, kind: str, message: str) -> None:
        """Print ``message`` as a warning, once per ``kind`` for this cache."""
        if kind not in self._warned:
            self._warned.add(kind)
            print(f"warning: cache.path={self.path}: {message}", file=sys.stderr)

    def put(self, key: str, endpoint: str, model: str, answer: dict[str, Any], latency_ms: float) -> bool:
        """Keep a reply (written by the next :meth:`aflush` or at :meth:`close`); True when a batch
        is ready to write."""
        entry = json.dumps({"answer": answer, "latency_ms": latency_ms}, ensure_ascii=False)
        self._pending.append((key, time.time(), endpoint, model, entry))
        return len(self._pending) >= BATCH

    async def aflush(self) -> None:
        """Write the pending entries in one transaction, on a worker thread."""
        pending, self._pending = self._pending, []
        if pending:
            await trio.to_thread.run_sync(self._write, pending)

    def flush(self) -> None:
        """Write the pending entries in one transaction, on this thread."""
        pending, self._pending = self._pending, []
        if pending:
            self._write(pending)

    def _write(self, pending: list[tuple[str, float, str, str, str]]) -> None:
        """One transaction; a lock held past :data:`WRITE_TIMEOUT_S` (or a full disk) drops it."""
        with self._write_lock:
            try:
                with self._conn:
                    self._conn.execute("begin immediate")
                    self._conn.executemany("insert or replace into responses values (?, ?, ?, ?, ?)", pending)
            except sqlite3.Error as exc:
                self.warn("write", f"cannot write to the response cache ({exc}); its new answers "
                                   "are not kept")

    def close(self) -> None:
        """Write what is pending and close the file."""
        try:
            self.flush()
        finally:
            self._reader.close()
            self._conn.close()


def _connect(path: Path, timeout_s: float) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
    use_wal(conn, timeout_s)
    conn.execute("pragma synchronous=normal")
    return conn


def _check_layout(conn: sqlite3.Connection, path: Path) -> None:
    """Make the table of a new file; refuse a file of another layout.

    Raises:
        EvalHydraError: A newer layout, or a ``responses`` table of other columns.
    """
    version = conn.execute("pragma user_version").fetchone()[0]
    if version > CACHE_SCHEMA_VERSION:
        raise EvalHydraError(
            f"cache.path={path}: the response cache was written by a newer evalhydra (layout {version}; "
            f"this one reads {CACHE_SCHEMA_VERSION}).",
            "Upgrade evalhydra, point cache.path at another file, or set cache.enabled=false.")
    columns = [row[1] for row in conn.execute("pragma table_info(responses)")]
    if columns and columns != list(_COLUMNS):
        raise EvalHydraError(f"cache.path={path}: the file holds a 'responses' table that is no evalhydra "
                             "response cache.", "Point cache.path at another file.")
    if not columns or version < CACHE_SCHEMA_VERSION:
        conn.execute(_SCHEMA)
        conn.execute(f"pragma user_version = {CACHE_SCHEMA_VERSION}")


_COLUMNS = ("key", "created", "endpoint", "model", "entry")


def _entry(row: tuple[Any, Any]) -> CacheEntry | None:
    """A stored row as an entry, or None when it does not read."""
    created, text = row
    if type(created) not in (int, float) or not math.isfinite(created):
        return None
    if not isinstance(text, str) or len(text) > MAX_ENTRY_CHARS:
        return None
    try:
        data = loads_plain(text, constants=False)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    answer, latency = data.get("answer"), data.get("latency_ms")
    if not isinstance(answer, dict) or not isinstance(latency, int | float) or not math.isfinite(latency):
        return None
    return CacheEntry(answer, float(latency), float(created))


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
        use_wal(conn)
        if expiry_s is None:
            deleted = conn.execute("delete from responses").rowcount
        else:
            cutoff = time.time() - expiry_s
            deleted = conn.execute("delete from responses where created < ?", (cutoff,)).rowcount
        conn.execute("vacuum")
    finally:
        conn.close()
    return int(deleted)
