"""The SQLite store: every result, every attempt, every run.

One file (WAL mode, busy timeout) that several processes can write at once:
each batch starts with ``BEGIN IMMEDIATE`` so writers queue on the lock instead
of failing. Tables:

* ``runs``: one row per invocation (config with secrets removed, fingerprint,
  status ``running|completed|interrupted|failed``).
* ``results``: one row per cell, keyed by ``cell_key`` (hash of everything that
  determines a result). Resume is "skip the keys that are already here".
* ``run_cells``: which cells belong to which run (a resumed run reuses cells
  stored by earlier runs, so reports of a run cover its whole plan).
* ``attempts``: every HTTP attempt (status, error kind, latency) for auditing.

Schema changes are numbered migrations tracked with ``PRAGMA user_version``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

__all__ = ["SCHEMA_VERSION", "Batch", "Store", "open_store", "merge_stores"]

RESULT_COLUMNS: dict[str, type] = {
    "cell_key": str,
    "run_id": str,
    "group": str,
    "eval_id": str,
    "service_name": str,
    "model": str,
    "requested_model": str,
    "run_index": int,
    "case_id": str,
    "kind": str,
    "status": str,
    "input": str,
    "ideal": str,
    "output": str,
    "tool_calls": str,
    "passed": int,
    "score": float,
    "failure_reason": str,
    "error_kind": str,
    "status_code": int,
    "attempt_count": int,
    "retried": int,
    "judge_attempt_count": int,
    "judge_retried": int,
    "judge_status_code": int,
    "judge_service": str,
    "judge_model": str,
    "latency_ms": int,
    "prompt_tokens": int,
    "completion_tokens": int,
    "cached_tokens": int,
    "judge_prompt_tokens": int,
    "judge_completion_tokens": int,
    "cost_usd": float,
    "judge_cost_usd": float,
    "details": str,
    "feedback": str,
    "rubric_scores": str,
    "failure_category": str,
    "suggested_fix": str,
    "pass_threshold": float,
    "attempts": int,
    "attempt_history": str,
    "duration_s": float,
    "exit_code": int,
    "log_path": str,
    "stdout_log_path": str,
    "trial_dir": str,
    "case_hash": str,
    "evaluated_at": str,
}


def _migration_1(db: sqlite_utils.Database) -> None:
    db.table("runs").create(
        {
            "run_id": str,
            "parent_run_id": str,
            "kind": str,
            "started_at": str,
            "finished_at": str,
            "status": str,
            "overrides": str,
            "config": str,
            "fingerprint": str,
            "version": str,
            "sweep_dir": str,
            "job_num": int,
            "hostname": str,
            "pid": int,
            "cells_total": int,
            "cells_run": int,
        },
        pk="run_id",
        if_not_exists=True,
    )
    db.table("results").create(RESULT_COLUMNS, pk="cell_key", if_not_exists=True)
    db.table("run_cells").create(
        {"run_id": str, "cell_key": str}, pk=("run_id", "cell_key"), if_not_exists=True
    )
    db.table("attempts").create(
        {
            "cell_key": str,
            "run_id": str,
            "call": str,
            "attempt": int,
            "status_code": int,
            "error_kind": str,
            "latency_ms": float,
            "error_message": str,
        },
        pk=("cell_key", "run_id", "call", "attempt"),
        if_not_exists=True,
    )
    for cols in (["run_id"], ["eval_id", "service_name", "model"], ["evaluated_at"]):
        db.table("results").create_index(cols, if_not_exists=True)
    db.table("run_cells").create_index(["cell_key"], if_not_exists=True)
    _create_views(db)


def _create_views(db: sqlite_utils.Database) -> None:
    views = {
        "run_results": """
            select rc.run_id as member_run_id, r.* from run_cells rc
            join results r on r.cell_key = rc.cell_key""",
        "eval_stats": """
            select eval_id, service_name, model, count(*) as total,
              sum(passed) as passed, sum(error_kind is not null) as errors,
              round(avg(passed), 4) as pass_rate, round(avg(latency_ms), 1) as mean_latency_ms,
              sum(retried) as retried_runs, sum(coalesce(cost_usd, 0)) as cost_usd
            from results group by eval_id, service_name, model""",
        "run_summary": """
            select ru.run_id, ru.started_at, ru.status, count(r.cell_key) as cells,
              sum(r.passed) as passed, round(avg(r.passed), 4) as pass_rate,
              sum(r.error_kind is not null) as errors
            from runs ru left join run_cells rc on rc.run_id = ru.run_id
            left join results r on r.cell_key = rc.cell_key group by ru.run_id""",
    }
    for name, sql in views.items():
        db.create_view(name, sql, replace=True)


def _migration_2(db: sqlite_utils.Database) -> None:
    """Report views: per-run stats, latest result per cell, failures, flakiness."""
    _create_report_views(db)


def _migration_3(db: sqlite_utils.Database) -> None:
    """Pass rates leave infrastructure errors out (``eval_stats`` and ``run_summary`` too)."""
    _create_report_views(db)


def _create_report_views(db: sqlite_utils.Database) -> None:
    for name, sql in REPORT_VIEWS.items():
        db.create_view(name, sql, replace=True)


_RUN_MEMBERS = """
    from run_cells rc join results r on r.cell_key = rc.cell_key
    join runs ru on ru.run_id = rc.run_id"""
# An infrastructure error (HTTP failure, timeout, agent ERROR/TIMEOUT): not a failure, and
# left out of pass rates (pass_rate = passed / (total - errors)).
_ERR = "(r.error_kind is not null or coalesce(r.status, '') in ('ERROR', 'TIMEOUT'))"
_COUNTS = f"""count(r.cell_key) as total, coalesce(sum(r.passed), 0) as passed,
          count(r.cell_key) - coalesce(sum(r.passed), 0) - coalesce(sum({_ERR}), 0) as failed,
          coalesce(sum({_ERR}), 0) as errors,
          round(1.0 * sum(r.passed) / nullif(count(r.cell_key) - sum({_ERR}), 0), 4) as pass_rate"""
_COST = "round(sum(coalesce(r.cost_usd, 0) + coalesce(r.judge_cost_usd, 0)), 6) as cost_usd"

#: Views of migrations 2 and 3 (documented in the README with example queries).
REPORT_VIEWS: dict[str, str] = {
    # One row per eval × service × model over every stored result (replaces migration 1's).
    "eval_stats": f"""
        select r.eval_id, r.service_name, r.model, count(*) as total, sum(r.passed) as passed,
          sum({_ERR}) as errors,
          round(1.0 * sum(r.passed) / nullif(count(*) - sum({_ERR}), 0), 4) as pass_rate,
          round(avg(r.latency_ms), 1) as mean_latency_ms, sum(r.retried) as retried_runs,
          {_COST}
        from results r group by r.eval_id, r.service_name, r.model""",
    # One row per run (replaces migration 1's).
    "run_summary": f"""
        select ru.run_id, ru.started_at, ru.status, count(r.cell_key) as cells,
          sum(r.passed) as passed,
          round(1.0 * sum(r.passed) / nullif(count(r.cell_key) - sum({_ERR}), 0), 4) as pass_rate,
          sum({_ERR}) as errors
        from runs ru left join run_cells rc on rc.run_id = ru.run_id
        left join results r on r.cell_key = rc.cell_key group by ru.run_id""",
    # One row per run × eval × service × model.
    "run_eval_stats": f"""
        select rc.run_id, ru.started_at, r."group", r.eval_id, r.service_name, r.model,
          {_COUNTS},
          round(avg(r.latency_ms), 1) as mean_latency_ms, sum(r.retried) as retried_runs,
          sum(coalesce(r.attempt_count, 0)) as total_attempts,
          sum(coalesce(r.prompt_tokens, 0) + coalesce(r.judge_prompt_tokens, 0)) as input_tokens,
          sum(coalesce(r.completion_tokens, 0) + coalesce(r.judge_completion_tokens, 0))
            as output_tokens,
          {_COST}
        {_RUN_MEMBERS}
        group by rc.run_id, r."group", r.eval_id, r.service_name, r.model""",
    # One row per run: results, passes, failures, errors, pass rate, cost.
    "run_pass_rates": f"""
        select ru.run_id, ru.started_at, ru.finished_at, ru.status, ru.kind,
          {_COUNTS},
          coalesce({_COST.replace(" as cost_usd", "")}, 0) as cost_usd
        from runs ru left join run_cells rc on rc.run_id = ru.run_id
        left join results r on r.cell_key = rc.cell_key
        group by ru.run_id""",
    # The most recent result of every (eval, service, model, case, trial), any run.
    "latest_results": """
        select * from (
          select r.*, row_number() over (
            partition by r.eval_id, r.service_name, r.model, r.case_id, r.run_index
            order by r.evaluated_at desc, r.cell_key desc) as recency
          from results r)
        where recency = 1""",
    # Every failing or erroring result, with the run it belongs to.
    "failures": f"""
        select rc.run_id, r.eval_id, r.service_name, r.model, r.case_id, r.run_index,
          coalesce(r.status, case when r.error_kind is not null then 'ERROR' else 'FAIL' end)
            as status,
          {_ERR} as is_error, r.error_kind, r.failure_reason, r.failure_category,
          r.suggested_fix, r.score, r.output, r.evaluated_at
        {_RUN_MEMBERS}
        where not coalesce(r.passed, 0)""",
    # Per run × eval × service × model × case, over trials without an infrastructure error.
    "case_flakiness": f"""
        select run_id, eval_id, service_name, model, case_id, trials, errors, passed,
          case when trials = errors then 'NO RESULT' when passed = trials - errors then 'STABLE'
               when passed = 0 then 'BROKEN' else 'FLAKY' end as verdict,
          round(2.0 * min(passed, trials - errors - passed) / nullif(trials - errors, 0), 4)
            as flakiness
        from (
          select rc.run_id, r.eval_id, r.service_name, r.model, r.case_id, count(*) as trials,
            sum({_ERR}) as errors, sum(r.passed) as passed
          {_RUN_MEMBERS}
          group by rc.run_id, r.eval_id, r.service_name, r.model, r.case_id)""",
}

def _migration_4(db: sqlite_utils.Database) -> None:
    """Results of a run in zig_eval's sort order straight from an index.

    ``runs.json`` lists a run's results sorted by (group, eval, service, trial,
    case, model); without this index SQLite sorts them in a temp B-tree (3.5 of
    9.3 s at a million rows). It replaces the ``(run_id)`` index, its prefix, so
    writes maintain no more indexes than before.
    """
    db.conn.execute("drop index if exists idx_results_run_id")
    db.conn.execute(
        "create index if not exists idx_results_run_seed_order on results "
        '(run_id, "group", eval_id, service_name, run_index, case_id, model)'
    )


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _migration_1, _migration_2, _migration_3, _migration_4,
]
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass
class Batch:
    """Rows written together in one transaction."""

    results: list[dict[str, Any]] = field(default_factory=list)
    members: list[tuple[str, str]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.results) + len(self.members) + len(self.attempts)

    def extend(self, other: Batch) -> None:
        """Append another batch's rows."""
        self.results.extend(other.results)
        self.members.extend(other.members)
        self.attempts.extend(other.attempts)


class Store:
    """A connection to the store; writes must come from a single task/thread."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.conn = _connect(path, read_only)
        self.db = sqlite_utils.Database(self.conn)
        if not read_only:
            migrate(self.db)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    # -- writes -----------------------------------------------------------
    def write(self, batch: Batch) -> None:
        """Write a batch atomically (``BEGIN IMMEDIATE`` … ``COMMIT``)."""
        if not len(batch):
            return
        with _immediate(self.conn):
            _insert_rows(self.conn, _INSERT_RESULT, [_result_values(r) for r in batch.results])
            _insert_rows(self.conn, _INSERT_MEMBER, batch.members)
            _insert_rows(self.conn, _INSERT_ATTEMPT, [_attempt_values(a) for a in batch.attempts])

    def start_run(self, row: dict[str, Any]) -> None:
        """Insert the ``runs`` row of a new invocation."""
        with _immediate(self.conn):
            self.db.table("runs").insert(row, replace=True)

    def finish_run(self, run_id: str, **fields: Any) -> None:
        """Update a run's status, finish time and counts."""
        with _immediate(self.conn):
            self.db.table("runs").update(run_id, fields)

    # -- reads ------------------------------------------------------------
    def done_keys(self, eval_ids: Sequence[str], service: str, *, retry_errors: bool) -> set[str]:
        """Cell keys already stored for these evals and service.

        With ``retry_errors``, cells whose result is an infrastructure error are
        left out, so they run again.
        """
        marks = ",".join("?" * len(eval_ids))
        sql = f"select cell_key from results where service_name = ? and eval_id in ({marks})"
        if retry_errors:
            sql += " and error_kind is null and status not in ('TIMEOUT', 'ERROR')"
        return {row[0] for row in self.conn.execute(sql, [service, *eval_ids])}

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[dict[str, Any]]:
        """Run a SELECT and yield rows as dicts."""
        cursor = self.conn.execute(sql, params)
        names = [d[0] for d in cursor.description]
        for row in cursor:
            yield dict(zip(names, row, strict=True))

    def run_rows(self, run_ids: Sequence[str]) -> Iterator[dict[str, Any]]:
        """Every result that belongs to the given runs, in a stable order."""
        marks = ",".join("?" * len(run_ids))
        sql = (
            "select distinct r.* from run_cells rc join results r on r.cell_key = rc.cell_key "
            f"where rc.run_id in ({marks}) "
            'order by r."group", r.eval_id, r.service_name, r.run_index, r.case_id, r.model'
        )
        return self.query(sql, list(run_ids))

    def runs(self, run_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """``runs`` rows, newest first (optionally only some ids)."""
        if run_ids:
            marks = ",".join("?" * len(run_ids))
            return list(self.query(f"select * from runs where run_id in ({marks})", list(run_ids)))
        return list(self.query("select * from runs order by started_at desc, run_id"))


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
    if read_only:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
        conn.execute("pragma query_only = 1")
        return conn
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
    conn.execute("pragma journal_mode = wal")
    conn.execute("pragma synchronous = normal")
    conn.execute("pragma busy_timeout = 30000")
    return conn


class _immediate:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("begin immediate")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.conn.execute("rollback" if exc_type else "commit")


def migrate(db: sqlite_utils.Database) -> None:
    """Bring the schema up to :data:`SCHEMA_VERSION` (idempotent, concurrent-safe)."""
    with _immediate(db.conn):
        version = db.conn.execute("pragma user_version").fetchone()[0]
        for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
            step(db)
            db.conn.execute(f"pragma user_version = {number}")


_RESULT_NAMES = list(RESULT_COLUMNS)
_INSERT_RESULT = "insert or replace into results ({}) values ".format(
    ", ".join(f'"{c}"' for c in _RESULT_NAMES))
_INSERT_MEMBER = "insert or ignore into run_cells (run_id, cell_key) values "
_ATTEMPT_NAMES = [
    "cell_key",
    "run_id",
    "call",
    "attempt",
    "status_code",
    "error_kind",
    "latency_ms",
    "error_message",
]
_INSERT_ATTEMPT = "insert or replace into attempts ({}) values ".format(", ".join(_ATTEMPT_NAMES))
#: Rows per multi-row INSERT (45 columns × 256 rows stays under SQLite's 32766 variables).
_ROWS_PER_INSERT = 256


def _insert_rows(conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[Any]]) -> None:
    """Insert ``rows`` with a few multi-row ``VALUES`` statements, not one statement per row.

    The writer runs in a worker thread; every SQLite step releases and retakes
    the GIL, so one step per row made the writer queue for the GIL hundreds of
    times per batch behind the busy event loop. A statement per 256 rows takes
    it once each. Statements hold a power of two of rows (256, then the rest
    as 128 + 64 + …), so the connection's statement cache keeps at most nine
    shapes per table instead of one per batch size (which grew the writer by
    ~50 MB over a long run).
    """
    if not rows:
        return
    width = len(rows[0])
    start = 0
    for size in _chunk_sizes(len(rows)):
        chunk = rows[start:start + size]
        start += size
        marks = ", ".join([f"({', '.join('?' * width)})"] * size)
        conn.execute(head + marks, [value for row in chunk for value in row])


def _chunk_sizes(total: int) -> list[int]:
    """``total`` as full chunks of :data:`_ROWS_PER_INSERT`, then powers of two."""
    full, rest = divmod(total, _ROWS_PER_INSERT)
    return [_ROWS_PER_INSERT] * full + [1 << bit for bit in range(rest.bit_length() - 1, -1, -1)
                                        if rest & (1 << bit)]


# Only these result columns can hold containers; everything else is a scalar that
# sqlite3 binds as is (bool included), so the hot path converts five values, not fifty.
_JSON_POSITIONS = [
    i for i, name in enumerate(_RESULT_NAMES)
    if name in ("input", "tool_calls", "details", "rubric_scores", "attempt_history")
]


def _result_values(row: dict[str, Any]) -> list[Any]:
    values = [row.get(name) for name in _RESULT_NAMES]
    for i in _JSON_POSITIONS:
        if isinstance(values[i], dict | list | tuple):
            values[i] = json.dumps(values[i], ensure_ascii=False, sort_keys=True)
    return values


def _attempt_values(row: dict[str, Any]) -> list[Any]:
    return [row.get(name) for name in _ATTEMPT_NAMES]


def open_store(path: str | Path, *, read_only: bool = False) -> Store:
    """Open (and, for writing, create and migrate) the store at ``path``."""
    from evalhydra.errors import EvalHydraError

    target = Path(path).expanduser()
    if read_only and not target.exists():
        raise EvalHydraError(f"No store at {target}.", "Run an eval first, or pass --store PATH.")
    return Store(target, read_only=read_only)


def merge_stores(target: Path, shards: Iterable[Path]) -> int:
    """Merge shard stores (e.g. one per SLURM job) into ``target`` exactly.

    Results are keyed by cell, so merging twice, or merging overlapping shards,
    never duplicates a result. Returns the number of result rows in ``target``.
    """
    store = open_store(target)
    try:
        for shard in shards:
            store.conn.execute("attach database ? as shard", (str(shard),))
            with _immediate(store.conn):
                for table in ("runs", "results", "run_cells", "attempts"):
                    store.conn.execute(f"insert or ignore into main.{table} select * from shard.{table}")
            store.conn.execute("detach database shard")
        return int(store.conn.execute("select count(*) from results").fetchone()[0])
    finally:
        store.close()
