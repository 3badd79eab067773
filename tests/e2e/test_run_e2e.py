"""End to end through real processes, a real mock server on loopback and a real store."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from tests.helpers import (
    chat_requests,
    mock_call,
    mock_process,
    numbered_registry,
    run_cli,
    start_cli,
    stored_results,
    wait_for,
)
from tests.reports.test_reports_zig import RUN_KEYS


def _args(registry: Path, url: str, db: Path, *extra: str) -> list[str]:
    return [
        f"registry={registry}",
        "service=mock",
        "service.mock.enabled=false",
        f"service.base_url={url}",
        "eval=g",
        f"store.path={db}",
        "run.progress=false",
        "hydra.run.dir=run",
        *extra,
    ]


def _one(db: Path, sql: str) -> object:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.slow
def test_sigkill_then_rerun_stores_each_cell_once_and_skips_stored_cells(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 300)
    db = tmp_path / "store.db"
    with mock_process("--latency-ms", "40") as url:
        proc = start_cli(*_args(registry, url, db, "run.concurrency=8", "run.batch_size=5"), cwd=tmp_path)
        wait_for(lambda: stored_results(db) >= 40, timeout=60)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
        before = stored_results(db)
        assert 40 <= before < 300
        mock_call(url, "reset", {})
        done = run_cli(*_args(registry, url, db, "run.concurrency=8"), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert chat_requests(url) == 300 - before  # no request for a stored cell
    assert _one(db, "select count(*) from results") == 300
    assert _one(db, "select count(distinct case_id) from results") == 300
    assert _one(db, "select sum(passed) from results") == 300
    assert _one(db, "select count(*) from runs where status = 'running'") == 0
    assert _one(db, "select count(*) from runs where status = 'interrupted'") == 1  # the killed one


@pytest.mark.slow
@pytest.mark.parametrize("presses", [1, 3])  # 3: an impatient user
def test_ctrl_c_flushes_marks_interrupted_and_exits_130(tmp_path: Path, presses: int) -> None:
    registry = numbered_registry(tmp_path / "reg", 400)
    db = tmp_path / "store.db"
    with mock_process("--latency-ms", "50") as url:
        proc = start_cli(*_args(registry, url, db, "run.concurrency=4"), cwd=tmp_path)
        wait_for(lambda: stored_results(db) >= 8, timeout=60)
        for _ in range(presses):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.05)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "interrupted" in err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err
        stored = stored_results(db)
        assert _one(db, "select status from runs") == "interrupted"
        assert _one(db, "select count(*) from run_cells") == stored
        mock_call(url, "reset", {})
        again = run_cli(*_args(registry, url, db, "run.concurrency=16"), cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert chat_requests(url) == 400 - stored
    assert _one(db, "select count(*) from results") == 400


@pytest.mark.slow
def test_a_rerun_heals_stored_errors_unless_told_to_keep_them(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 6)
    db = tmp_path / "store.db"
    with mock_process("--fail-first-n", "3", "--fail-status", "503") as url:
        first = run_cli(*_args(registry, url, db, "run.concurrency=1"), cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert _one(db, "select count(*) from results where error_kind = 'server_error'") == 3
        assert _one(db, "select count(*) from results where status = 'ERROR'") == 3
        assert "errors" in first.stdout
        mock_call(url, "config", {"fail_first_n": 0})
        mock_call(url, "reset", {})
        kept = run_cli(*_args(registry, url, db, "run.retry_errors=false"), cwd=tmp_path)
        assert chat_requests(url) == 0
        assert "3 stored errors reused from earlier runs; re-send them with run.retry_errors=true" in (
            kept.stdout)
        healed = run_cli(*_args(registry, url, db), cwd=tmp_path)  # the default re-sends chat errors
        assert healed.returncode == 0, healed.stderr
        assert chat_requests(url) == 3
        assert "6 cells, 6 passed, 0 failed, 0 errors" in healed.stdout
        run_cli(*_args(registry, url, db), cwd=tmp_path)
        assert chat_requests(url) == 3  # nothing left to send
    assert _one(db, "select count(*) from results where passed = 1") == 6
    assert _one(db, "select count(*) from attempts where error_kind = 'server_error'") == 3


@pytest.mark.slow
def test_a_4xx_that_cannot_succeed_is_kept_unless_every_error_is_resent(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 4)
    db = tmp_path / "store.db"
    with mock_process("--fail-first-n", "2", "--fail-status", "400") as url:
        first = run_cli(*_args(registry, url, db, "run.concurrency=1"), cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert _one(db, "select count(*) from results where status_code = 400") == 2
        mock_call(url, "config", {"fail_first_n": 0})
        mock_call(url, "reset", {})
        kept = run_cli(*_args(registry, url, db), cwd=tmp_path)  # the default: a 400 is not paid twice
        assert kept.returncode == 0 and chat_requests(url) == 0
        resent = run_cli(*_args(registry, url, db, "run.retry_errors=all"), cwd=tmp_path)
        assert resent.returncode == 0 and chat_requests(url) == 2
    assert _one(db, "select count(*) from results where passed = 1") == 4


@pytest.mark.slow
def test_rate_limit_storm_is_reported_as_errors_not_failures(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 5)
    db = tmp_path / "store.db"
    with mock_process("--fail-rate", "1", "--fail-status", "429") as url:
        limits = ("service.retry.max_attempts=2", "service.rate_limit_timeout_s=0")  # a 429 is a failure
        res = run_cli(*_args(registry, url, db, *limits), cwd=tmp_path)
    assert res.returncode == 3, res.stderr  # every cell errored: the run measured nothing
    assert "error: could not measure: g.e on mock/mock-model: no scored cell (5 of 5 errored)" in res.stderr
    assert "5 cells were rate limited (429)" in res.stdout
    assert (
        _one(db, "select count(*) from results where error_kind = 'rate_limited' and status = 'ERROR'") == 5
    )
    assert _one(db, "select count(*) from attempts where status_code = 429") == 10
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| g.e" in report and "|        5 |" in report  # five errors column


@pytest.mark.slow
def test_fail_under_gates_the_exit_code(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 4)
    with mock_process("--fixed-reply", "nope") as url:
        res = run_cli(*_args(registry, url, tmp_path / "s.db", "run.fail_under=0.9"), cwd=tmp_path)
    assert res.returncode == 1
    assert "pass rate 0.0% < 90.0%" in res.stderr


@pytest.mark.slow
def test_user_errors_print_one_line_without_traceback(tmp_path: Path) -> None:
    res = run_cli("registry=/nonexistent/dir", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "registry=/nonexistent/dir: no such directory" in res.stderr
    res = run_cli("judge_service=nope", "eval=quality", "store.path=s.db", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "Judge service 'nope' not found" in res.stderr and "mock_judge" in res.stderr


@pytest.mark.slow
def test_default_run_writes_seed_artifacts(tmp_path: Path) -> None:
    res = run_cli("hydra.run.dir=out", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    runs = json.loads((tmp_path / "out" / "runs.json").read_text())
    assert runs["schema_version"] == 2
    assert list(runs["runs"][0]) == RUN_KEYS  # the seed's RunResult keys, in order
    evals = json.loads((tmp_path / "out" / "evals.json").read_text())
    assert evals["evals"][0]["stats"]["pass_rate_ci_low"] == pytest.approx(0.3424, abs=1e-4)
    assert "smoke.reply_ok" in res.stdout and "100.0%" in res.stdout
    assert (tmp_path / "outputs" / "evalhydra.db").exists()


@pytest.mark.slow
def test_per_eval_threshold_gates_only_its_eval(tmp_path: Path) -> None:
    ok = run_cli(
        "eval=smoke", "++run.fail_under_per_eval={smoke.reply_ok:0.95}", "run.progress=false", cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    bad = run_cli(
        "eval=quality", "++run.fail_under_per_eval={quality:0.5}", "run.progress=false", cwd=tmp_path
    )
    assert bad.returncode == 1
    assert "quality.helpful_summary on mock/mock-model: pass rate 0.0% < 50.0%" in bad.stderr
