"""The SQLite store on real files: schema, batching writer, concurrency, merge."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.store.db import Batch, insert_present, open_store
from evalhydra.store.inserts import ReusedCells
from evalhydra.store.merge import merge_stores
from evalhydra.store.rows import RESULT_FIELDS, ResultRow
from evalhydra.store.schema import RESULT_COLUMNS, SCHEMA_VERSION
from tests.helpers import result_row


def _row(key: str, run: str = "r1", passed: bool = True, error: str | None = None) -> dict[str, object]:
    row = result_row(key, run, error=error, score=1.0 if passed else 0.0, details={"k": [1, 2]}, latency_ms=5)
    row.pop("evaluated_at")
    return {**row, "status": "PASS" if passed else "FAIL", "passed": passed}


def test_schema_tables_views_and_version(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    names = {r["name"] for r in store.query("select name from sqlite_master where type in ('table','view')")}
    assert {"runs", "results", "run_cells", "attempts", "run_results", "eval_stats", "run_summary"} <= names
    assert store.conn.execute("pragma user_version").fetchone()[0] == SCHEMA_VERSION
    assert store.conn.execute("pragma journal_mode").fetchone()[0] == "wal"
    indexes = {r["name"] for r in store.query("select name from sqlite_master where type = 'index'")}
    assert any("eval_id" in i for i in indexes)
    store.close()
    open_store(tmp_path / "s.db").close()  # reopening is a no-op migration


def test_write_is_atomic_and_idempotent(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    batch = Batch(results=[_row("a"), _row("b")], members=[("r1", "a"), ("r1", "b")])
    store.write(batch)
    store.write(batch)  # same cells again: still one row each
    assert store.conn.execute("select count(*) from results").fetchone()[0] == 2
    assert store.conn.execute("select count(*) from run_cells").fetchone()[0] == 2
    row = next(store.run_rows(["r1"]))
    assert row["details"] == '{"k": [1, 2]}' and row["passed"] == 1
    with pytest.raises(sqlite3.Error):  # a bad batch rolls back entirely
        store.write(
            Batch(
                results=[_row("c")],
                members=[("r1", "c")],
                attempts=[{"cell_key": "c", "latency_ms": object()}],
            )
        )
    assert store.conn.execute("select count(*) from results").fetchone()[0] == 2


def test_nulls_and_flags_are_stored_as_sqlite_would_bind_them(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")  # the store registers adapters for None and bool
    store.write(Batch(results=[{**_row("a", passed=False), "retried": True, "score": None}]))
    stored = store.conn.execute("select typeof(score), passed, typeof(passed), retried, typeof(retried), "
                                "typeof(judge_model) from results").fetchone()
    assert stored == ("null", 0, "integer", 1, "integer", "null")
    plain = sqlite3.connect(":memory:").execute("select ?, typeof(?), ?, typeof(?)",
                                                (None, None, True, False))
    assert plain.fetchone() == (None, "null", 1, "integer")


def test_columns_written_by_name_have_no_default(tmp_path: Path) -> None:
    # The writer leaves a batch's all-NULL columns out of its INSERT; that stores NULL only
    # because no column of these tables has a default.
    store = open_store(tmp_path / "s.db")
    for table in ("results", "attempts"):
        defaults = store.conn.execute(f"select name, dflt_value from pragma_table_info('{table}') "
                                      "where dflt_value is not null").fetchall()
        assert defaults == [], table
    store.close()


def test_a_rewritten_row_keeps_no_value_its_new_version_lacks(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    full = {**_row("a", passed=False), "failure_reason": "wrong", "judge_model": "j", "retried": True}
    attempt = {"cell_key": "a", "run_id": "r1", "call": "candidate", "attempt": 1, "status_code": 500,
               "error_kind": "HTTP", "latency_ms": 2.0, "error_message": "boom"}
    store.write(Batch(results=[full], attempts=[attempt]))
    bare = {**_row("a"), "details": None, "score": None, "latency_ms": None}
    store.write(Batch(results=[bare, _row("b", passed=False)],  # b has values a lacks: one statement
                      attempts=[{**attempt, "status_code": None, "error_kind": None, "error_message": None}]))
    got = store.conn.execute("select cell_key, failure_reason, judge_model, retried, details, score, "
                             "latency_ms, passed from results order by cell_key").fetchall()
    assert got[0] == ("a", None, None, None, None, None, None, 1)
    assert got[1][0] == "b" and got[1][4] == '{"k": [1, 2]}' and got[1][7] == 0
    assert store.conn.execute("select status_code, error_kind, error_message, latency_ms "
                              "from attempts").fetchall() == [(None, None, None, 2.0)]
    store.close()


def test_done_keys_and_retry_errors(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    store.write(
        Batch(results=[_row("ok"), _row("bad", passed=False), _row("err", passed=False, error="timeout")])
    )
    assert set(store.done_versions(["g.e"], "s", retry_errors=False)) == {"ok", "bad", "err"}
    assert set(store.done_versions(["g.e"], "s", retry_errors=True)) == {"ok", "bad"}
    assert store.done_versions(["other"], "s", retry_errors=False) == {}
    store.write(Batch(results=[_row("ok", run="r2")]))  # no evaluated_at: the larger run id is newer
    assert store.done_versions(["g.e"], "s", retry_errors=True) == {"ok": "r2", "bad": "r1"}


def test_reused_cells_name_the_version_read_whatever_their_order(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    keys = [f"k{i:03d}" for i in range(300)]
    store.write(Batch(results=[_row(key) for key in keys]))
    shuffled = keys[1::2] + keys[::2]
    versions = dict.fromkeys(keys, "r1")
    store.write(Batch(reused=[ReusedCells("r9", shuffled, versions)]))
    store.write(Batch(reused=[ReusedCells("r9", keys[:1], versions)]))  # recorded twice: kept once
    got = store.conn.execute("select cell_key, result_run_id from run_cells where run_id = 'r9' "
                             "order by cell_key").fetchall()
    assert got == [(key, "r1") for key in keys]


def test_read_only_store_rejects_writes(tmp_path: Path) -> None:
    open_store(tmp_path / "s.db").close()
    store = open_store(tmp_path / "s.db", read_only=True)
    with pytest.raises(sqlite3.OperationalError):
        store.conn.execute("delete from results")
    with pytest.raises(EvalHydraError, match="No store at"):
        open_store(tmp_path / "missing.db", read_only=True)


def _writer_process(path: str, worker: int, n: int) -> None:
    store = open_store(Path(path))
    for start in range(0, n, 50):
        rows = [_row(f"w{worker}-{i}", run=f"r{worker}") for i in range(start, start + 50)]
        store.write(Batch(results=rows, members=[(f"r{worker}", r["cell_key"]) for r in rows]))  # type: ignore[misc]
    store.close()


@pytest.mark.slow
def test_concurrent_processes_write_one_store(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    open_store(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer_process, args=(str(path), w, 1000)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    store = open_store(path)
    assert store.conn.execute("select count(*) from results").fetchone()[0] == 4000


def _open_at_once(path: str, barrier: Any) -> None:
    barrier.wait()
    open_store(path).close()  # raises (exit code 1) if it cannot open the store


@pytest.mark.slow  # 20 rounds of four processes: ~25 s
def test_processes_that_create_one_store_at_once_all_open_it(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("forkserver")  # forked from one clean process: each starts at once
    ctx.set_forkserver_preload(["evalhydra.store.db", "tests.store.test_store"])
    for round_ in range(20):  # the race lost about one open in fifteen before the fix
        barrier = ctx.Barrier(4)
        procs = [ctx.Process(target=_open_at_once, args=(str(tmp_path / f"new{round_}.db"), barrier))
                 for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0, 0, 0]


def test_merge_shards_exactly(tmp_path: Path) -> None:
    for name, keys in (("a", ["1", "2"]), ("b", ["2", "3"])):
        shard = open_store(tmp_path / f"{name}.db")
        shard.start_run({"run_id": f"run-{name}", "status": "completed", "started_at": "t"})
        shard.write(
            Batch(
                results=[_row(k, run=f"run-{name}") for k in keys], members=[(f"run-{name}", k) for k in keys]
            )
        )
        shard.close()
    shards = [tmp_path / "a.db", tmp_path / "b.db"]
    assert merge_stores(tmp_path / "all.db", shards) == 4  # cell 2 in two versions: run a's, run b's
    assert merge_stores(tmp_path / "all.db", shards) == 4  # merging again adds nothing
    store = open_store(tmp_path / "all.db")
    assert {r["run_id"] for r in store.runs()} == {"run-a", "run-b"}
    for run in ("run-a", "run-b"):  # each run keeps the versions it wrote
        assert {r["run_id"] for r in store.run_rows([run])} == {run}


@pytest.mark.parametrize("size", [1, 255, 256, 257, 1000])
def test_batches_of_any_size_store_every_row_and_member(tmp_path: Path, size: int) -> None:
    store = open_store(tmp_path / "s.db")
    rows = [_row(f"k{i:04d}", passed=i % 3 > 0) for i in range(size)]
    attempts = [{"cell_key": r["cell_key"], "run_id": "r1", "call": "candidate", "attempt": 1,
                 "status_code": 200, "latency_ms": 1.5} for r in rows]
    store.write(Batch(results=rows, members=[("r1", str(r["cell_key"])) for r in rows], attempts=attempts))
    got = store.conn.execute("select cell_key, passed, details from results order by cell_key").fetchall()
    assert got == [(r["cell_key"], int(bool(r["passed"])), '{"k": [1, 2]}') for r in rows]
    counts = [store.conn.execute(f"select count(*) from {table}").fetchone()[0]
              for table in ("run_cells", "attempts")]
    assert counts == [size, size]
    store.close()


def test_insert_statements_come_in_few_shapes() -> None:
    from evalhydra.store.inserts import _chunk_sizes

    shapes = set()
    for total in range(0, 2000):
        sizes = _chunk_sizes(total)
        assert sum(sizes) == total and sizes == sorted(sizes, reverse=True)
        shapes.update(sizes)
    assert shapes == {1 << bit for bit in range(9)}  # 1 … 256: a bounded statement cache


def test_rows_are_typed_and_unknown_keys_are_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    with pytest.raises(ValueError, match="not results columns: statsu"):
        store.write(Batch(results=[{**_row("a"), "statsu": "PASS"}]))  # type: ignore[list-item]
    with pytest.raises(TypeError):
        ResultRow(**{**_row("a"), "statsu": "PASS"})  # type: ignore[arg-type]
    assert store.query("select count(*) as n from results").__next__()["n"] == 0  # nothing half-written
    store.write(Batch(results=[ResultRow.from_mapping(_row("a"))]))
    assert [r["cell_key"] for r in store.query("select cell_key from results")] == ["a"]
    store.close()


def test_the_typed_row_declares_the_table_columns(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    columns = [r["name"] for r in store.query("select name from pragma_table_info('results')")]
    assert tuple(columns) == RESULT_FIELDS == tuple(RESULT_COLUMNS)
    store.close()


def test_migration_5_renames_agent_tool_call_args(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = open_store(path)
    calls = [{"name": "write", "arguments": {"p": 1}}]
    store.write(Batch(results=[{**_row("a"), "kind": "agent", "tool_calls": calls}]))  # type: ignore[list-item]
    store.conn.execute("""update results set tool_calls = '[{"args": {"p": 1}, "name": "write"}]'""")
    store.conn.execute("pragma user_version = 4")
    store.close()
    store = open_store(path)
    text = store.conn.execute("select tool_calls from results").fetchone()[0]
    assert json.loads(text) == [{"arguments": {"p": 1}, "name": "write"}]
    assert store.conn.execute("pragma user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()


def test_migration_8_drops_the_claims_index_by_run_and_keeps_the_claims(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    open_store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("create index idx_claims_run_id on claims (run_id)")  # as schema version 7 had it
    conn.execute("insert into claims (cell_key, run_id, expires_at) values ('k', 'run-a', 1e12)")
    conn.execute("pragma user_version = 7")
    conn.commit()
    conn.close()
    store = open_store(path)
    indexes = [r[1] for r in store.conn.execute("pragma index_list(claims)")]
    assert indexes == ["sqlite_autoindex_claims_1"]  # the cell key's, which every claim statement uses
    assert list(store.conn.execute("select cell_key, run_id from claims")) == [("k", "run-a")]
    assert store.conn.execute("pragma user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()


def test_a_run_whose_process_is_gone_is_marked_interrupted(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    host = socket.gethostname()
    for run_id, pid, where in (("gone", int(dead.stdout), host), ("alive", os.getpid(), host),
                               ("elsewhere", int(dead.stdout), "another-host")):
        store.start_run({"run_id": run_id, "status": "running", "hostname": where, "pid": pid,
                         "started_at": "2026-01-01T00:00:00.000Z"})
    store.close()
    store = open_store(tmp_path / "s.db")
    statuses = {r["run_id"]: r["status"] for r in store.query("select run_id, status from runs")}
    store.close()
    assert statuses == {"gone": "interrupted", "alive": "running", "elsewhere": "running"}


def test_a_huge_output_is_stored_cut_with_a_marker(tmp_path: Path) -> None:
    from evalhydra.store.rows import MAX_STORED_OUTPUT_CHARS

    store = open_store(tmp_path / "s.db")
    big = "x" * (MAX_STORED_OUTPUT_CHARS + 10)
    row = {**_row("big"), "output": big, "reasoning": big}  # the thinking too (issue 47, item 11)
    store.write(Batch(results=[row, {**_row("small"), "output": "ok", "reasoning": "hm"}]))
    rows = store.conn.execute("select cell_key, output, reasoning from results").fetchall()
    stored = {key: (output, reasoning) for key, output, reasoning in rows}
    assert stored["small"] == ("ok", "hm")
    for text in stored["big"]:
        assert text.startswith("x" * MAX_STORED_OUTPUT_CHARS)
        assert text.endswith(f"[evalhydra: output cut at {MAX_STORED_OUTPUT_CHARS} of "
                             f"{MAX_STORED_OUTPUT_CHARS + 10} characters]")


def test_now_iso_is_utc_with_milliseconds_and_follows_the_clock() -> None:
    import datetime
    import re
    import time

    from evalhydra.store.rows import now_iso

    stamps = []
    for _ in range(5):
        stamps.append(now_iso())
        time.sleep(0.0012)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", s) for s in stamps)
    assert stamps == sorted(stamps) and len(set(stamps)) == 5  # a new millisecond, a new stamp
    parsed = datetime.datetime.strptime(now_iso(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC)
    assert abs((datetime.datetime.now(datetime.UTC) - parsed).total_seconds()) < 0.5


def test_inserts_name_a_bounded_number_of_column_selections(tmp_path: Path) -> None:
    # Each selection of columns brings its own cached statements (the largest ~0.8 MB).
    from evalhydra.store.inserts import _SHAPES

    store = open_store(tmp_path / "s.db")
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    optional = ["score", "failure_reason", "latency_ms", "judge_model", "feedback", "details", "cost_usd",
                "prompt_tokens", "exit_code", "trial_dir", "log_path", "suggested_fix"]
    for i, column in enumerate(optional):  # every batch leaves a different column NULL
        store.write(Batch(results=[{**_row(f"k{i}"), "judge_model": "j", "feedback": "f",
                                    "exit_code": 0, "trial_dir": "t", "log_path": "l",
                                    "suggested_fix": "s", column: None}]))
    store.conn.set_trace_callback(None)
    inserts = [s.split(" values ")[0] for s in statements if s.startswith("insert or replace into results")]
    assert len(inserts) == len(optional) and len(set(inserts)) == _SHAPES + 1  # then every column
    assert inserts[-1].count(",") == len(RESULT_FIELDS) - 1
    stored = store.conn.execute("select cell_key, score, exit_code from results order by cell_key").fetchall()
    assert len(stored) == len(optional) and all(row[0].startswith("k") for row in stored)
    by_key = {key: (score, exit_code) for key, score, exit_code in stored}
    assert by_key["k0"][0] is None and by_key["k8"][1] is None and by_key["k1"] == (1.0, 0)
    store.close()


def _stored(store: Any, table: str) -> list[tuple[Any, ...]]:
    columns = [r[1] for r in store.conn.execute(f"pragma table_info({table})")]
    picks = ", ".join(f'"{c}", typeof("{c}")' for c in columns)
    return store.conn.execute(f"select {picks} from {table} order by rowid").fetchall()


def test_a_batch_stores_what_its_rows_written_one_by_one_store(tmp_path: Path) -> None:
    # In a batch the writer binds once the columns all rows share (run, model, tokens, cost
    # here); the rows also vary in NULLs, flags and types (1, 1.0, True), and in statements.
    mixed: list[Any] = [1, 1.0, True, 1]
    rows = [{**_row(f"k{i}"), "attempt_count": mixed[i % 4], "prompt_tokens": 7, "cost_usd": 0.25,
             "judge_model": None if i % 2 else "j", "retried": bool(i % 3), "latency_ms": 5 + i % 2}
            for i in range(600)]  # five statements: 256 + 256 + 64 + 16 + 8
    attempts = [{"cell_key": f"k{i}", "run_id": "r1", "call": "candidate", "attempt": 1,
                 "status_code": 200 if i % 5 else 500, "error_kind": None, "latency_ms": 2.0}
                for i in range(600)]
    together, apart = open_store(tmp_path / "together.db"), open_store(tmp_path / "apart.db")
    members = [("r1" if i % 7 else "r2", f"k{i}") for i in range(600)]
    together.write(Batch(results=rows, attempts=attempts, members=members))
    together.write(Batch(members=[("r3", f"k{i}") for i in range(300)]))  # one run's: its id bound once
    for row, attempt, member in zip(rows, attempts, members, strict=True):
        apart.write(Batch(results=[row], attempts=[attempt], members=[member]))
    for i in range(300):
        apart.write(Batch(members=[("r3", f"k{i}")]))
    for table in ("results", "attempts"):
        assert _stored(together, table) == _stored(apart, table), table
    assert sorted(_stored(together, "run_cells")) == sorted(_stored(apart, "run_cells"))  # own rows first
    together.close()
    apart.close()


class _Recording:
    """A connection that records what each statement binds."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.calls = conn, []

    def execute(self, sql: str, params: list[Any]) -> sqlite3.Cursor:
        self.calls.append((sql, list(params)))
        return self.conn.execute(sql, params)


def test_values_every_row_of_a_batch_shares_are_bound_once_a_statement() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("create table t (k, run, flag, n)")
    rows = [(f"k{i}", "run-1", i % 2 == 0, 3) for i in range(300)]  # 256 + 32 + 8 + 4
    recording, shapes = _Recording(conn), set()
    insert_present(recording, "insert into t", ["k", "run", "flag", "n"], rows, shapes)  # type: ignore[arg-type]
    assert shapes == {((0, 1, 2, 3), (1, 3))}
    sql, params = recording.calls[0]
    assert sql.startswith("insert into t (run, n, k, flag) values (?1, ?2, ?, ?), (?1, ?2, ?, ?)")
    assert params[:2] == ["run-1", 3] and len(params) == 2 + 2 * 256
    assert [len(p) for _, p in recording.calls] == [2 + 2 * n for n in (256, 32, 8, 4)]
    assert conn.execute("select k, run, flag, n from t order by rowid").fetchall() == [
        (k, run, int(flag), n) for k, run, flag, n in rows]


def test_a_batch_of_repeated_rows_is_written() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("create table t (k, n)")
    insert_present(conn, "insert into t", ["k", "n"], [("a", 1), ("a", 1), ("a", 1)], set())
    assert conn.execute("select k, n from t").fetchall() == [("a", 1)] * 3


def test_equal_values_of_different_types_are_not_shared() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("create table t (k, n)")  # no type: SQLite keeps 1 and 1.0 apart
    rows = [("a", 1), ("b", 1.0), ("c", True)]
    shapes: set[Any] = set()
    insert_present(conn, "insert into t", ["k", "n"], rows, shapes)
    assert shapes == {((0, 1), ())}
    assert conn.execute("select n, typeof(n) from t order by rowid").fetchall() == [
        (1, "integer"), (1.0, "real"), (1, "integer")]
