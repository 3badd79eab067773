"""The store's report views: the example queries of docs/store.md, and upgrading an older store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from evalhydra.store.db import Batch, open_store
from evalhydra.store.schema import MIGRATIONS, SCHEMA_VERSION
from tests.reports.support import MockStore, mock_store, result_row, write_run

__all__ = ["README_QUERIES", "mock_store"]

#: The example queries of docs/store.md's "Views" section (the same text, verbatim).
README_QUERIES = [
    ("select run_id, started_at, total, passed, failed, errors, pass_rate, cost_usd from "
     "run_pass_rates order by started_at desc limit 10"),
    ("select eval_id, service_name, model, total, passed, errors, pass_rate, mean_latency_ms, "
     "cost_usd from run_eval_stats where run_id = (select run_id from runs order by started_at desc "
     "limit 1)"),
    ("select started_at, eval_id, service_name, model, pass_rate from run_eval_stats order by "
     "eval_id, service_name, model, started_at"),
    ("select eval_id, service_name, model, case_id, run_index, passed, output from latest_results "
     "where passed = 0"),
    ("select run_id, eval_id, case_id, run_index, status, error_kind, failure_reason, suggested_fix "
     "from failures order by run_id, eval_id, case_id limit 20"),
    ("select failure_category, count(*) as n from failures where not is_error group by 1 order by n "
     "desc"),
    ("select eval_id, service_name, model, case_id, passed, trials, errors, flakiness from "
     "case_flakiness where verdict = 'FLAKY' order by flakiness desc limit 20"),
    ("select eval_id, service_name, model, total, errors, pass_rate from eval_stats order by "
     "pass_rate"),
]


@pytest.mark.parametrize("sql", README_QUERIES)
def test_readme_queries_run_against_a_real_store(mock_store: MockStore, sql: str) -> None:
    assert '"' not in sql  # the docs quote each query in double quotes
    conn = sqlite3.connect(f"file:{mock_store.path}?mode=ro", uri=True)
    rows = conn.execute(sql).fetchall()
    conn.close()
    if "from run_pass_rates" in sql:
        assert len(rows) == len(mock_store.runs)


def test_views_count_errors_apart_from_failures(mock_store: MockStore) -> None:
    store = open_store(mock_store.path, read_only=True)
    flaky = mock_store.runs["flaky"]
    (stats,) = store.query("select * from run_eval_stats where run_id = ?", [flaky])
    assert (stats["total"], stats["passed"], stats["failed"], stats["errors"]) == (6, 3, 0, 3)
    assert stats["pass_rate"] == 1.0
    failures = list(store.query("select * from failures where run_id = ?", [flaky]))
    assert len(failures) == 3 and all(f["is_error"] and f["status"] == "ERROR" for f in failures)
    latest = list(store.query("select count(*) as n from latest_results"))
    assert latest == [{"n": 6 + 6 + 6 + 10}]
    store.close()


def test_an_older_store_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite_utils.Database(path)
    MIGRATIONS[0](db)
    db.conn.execute("pragma user_version = 1")
    db.conn.commit()
    db.close()
    store = open_store(path)
    assert store.conn.execute("pragma user_version").fetchone()[0] == SCHEMA_VERSION >= 3
    rows = [result_row("eval-old-aaaaaaaa", f"c{i}", passed=i == 0) for i in range(2)]
    rows.append(result_row("eval-old-aaaaaaaa", "c9", passed=False, status="ERROR", error_kind="timeout"))
    write_run(store, "eval-old-aaaaaaaa", rows)
    (legacy,) = store.query("select * from eval_stats")
    assert (legacy["total"], legacy["errors"], legacy["pass_rate"]) == (3, 1, 0.5)
    (flaky,) = store.query("select * from run_pass_rates")
    assert (flaky["failed"], flaky["errors"], flaky["pass_rate"]) == (1, 1, 0.5)
    store.write(Batch())  # still writable
    store.close()
