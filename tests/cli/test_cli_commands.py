"""The store subcommands: help, runs, report, compare (exit codes), query (read-only), results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalhydra.cli.commands import STORE_COMMANDS as COMMANDS
from evalhydra.cli.commands import STORELESS_COMMANDS
from evalhydra.cli.store_commands import main
from evalhydra.store.db import open_store
from tests.helpers import run_cli
from tests.reports.support import (
    MockStore,
    mock_store,
    regression_store,
    result_row,
    write_run,
)

__all__ = ["mock_store"]

BASE, CAND = "eval-base-aaaaaaaa", "eval-cand-bbbbbbbb"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_has_help_with_store_where_it_reads_one(name: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert ("--store PATH" in text and "outputs/evalhydra.db" in text) == (name not in STORELESS_COMMANDS)


def test_compare_is_dispatched_by_the_console_entry(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "evalhydra", "compare", "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "--fail-on-regression" in res.stdout


def test_runs_lists_runs_with_pass_rates(mock_store: MockStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "runs", "--store", str(mock_store.path), "--format", "json")
    rows = json.loads(out)
    assert code == 0 and {r["run_id"] for r in rows} == set(mock_store.runs.values())
    flaky = next(r for r in rows if r["run_id"] == mock_store.runs["flaky"])
    assert (flaky["cells"], flaky["errors"], flaky["status"], flaky["evals"]) == (6, 3, "completed",
                                                                                   "smoke.reply_ok")
    assert flaky["pass_pct"] == 100.0  # errors are not failures


def test_report_writes_the_asked_formats(mock_store: MockStore, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    run, others = mock_store.runs["base"], [r for k, r in mock_store.runs.items() if k != "base"]
    size = next(n for n in range(13, len(run)) if not any(o.startswith(run[:n]) for o in others))
    args = ["report", "--store", str(mock_store.path), run[:size], "--out", str(tmp_path)]  # a unique prefix
    code, out, _ = _cli(capsys, *args, "--format", "md,junit")
    assert code == 0 and sorted(Path(p).name for p in out.split()) == ["junit.xml", "report.md", "summary.md"]
    code, _, err = _cli(capsys, *args, "--format", "pdf")
    assert code == 2 and "Unknown report format: pdf" in err
    code, _, err = _cli(capsys, "report", "--store", str(mock_store.path), "eval-nope")
    assert code == 2 and "Run 'eval-nope' not found" in err


def test_compare_fails_only_on_a_significant_regression(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    regression_store(tmp_path / "s.db").close()
    store = ["--store", str(tmp_path / "s.db")]
    code, out, _ = _cli(capsys, "compare", *store, BASE, CAND, "--fail-on-regression")
    assert code == 1
    assert "regressed (lower pass fraction on the candidate): 10 case(s)" in out
    assert "  g.e: c00, c01, c02" in out and "REGRESSION" in out
    code, out, _ = _cli(capsys, "compare", *store, CAND, BASE, "--fail-on-regression", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["overall"]["paired"]["improved"][:1] == ["g.e/c00"]
    assert doc["comparisons"][0]["paired"]["ci_low"] > 0 and doc["target_kind"] == "run"
    code, out, _ = _cli(capsys, "compare", *store, BASE, CAND)  # without the flag: report only
    assert code == 0


def test_compare_with_small_or_unpaired_differences(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    regression_store(tmp_path / "s.db", broken=1).close()
    store = ["--store", str(tmp_path / "s.db")]
    code, out, _ = _cli(capsys, "compare", *store, BASE, CAND, "--fail-on-regression", "--format", "md")
    assert code == 0 and "no significant change" in out and "| g.e " in out
    db = open_store(tmp_path / "s.db")
    write_run(db, "eval-other-cccccccc", [result_row("eval-other-cccccccc", "zz", eval_id="o.e")])
    db.close()
    code, _, err = _cli(capsys, "compare", *store, BASE, "eval-other", "--fail-on-regression")
    assert code == 2 and "cases scored on both sides" in err
    code, _, err = _cli(capsys, "compare", *store, BASE)
    assert code == 2 and "compare needs BASELINE and CANDIDATE" in err


def test_compare_services_within_runs_and_errors_left_out(mock_store: MockStore,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    runs, store = mock_store.runs, ["--store", str(mock_store.path)]
    code, out, _ = _cli(capsys, "compare", *store, runs["base"], runs["judge"], "--baseline-service", "mock",
                        "--candidate-service", "mock_judge", "--fail-on-regression")
    assert code == 0 and "@mock_judge" in out and "| service" not in out and "service " in out
    code, out, _ = _cli(capsys, "compare", *store, f"{runs['base']}@mock:mock-model",
                        f"{runs['flaky']}@mock:mock-flaky", "--format", "json", "--fail-on-regression")
    doc = json.loads(out)
    assert code == 0 and doc["target_kind"] == "model"
    assert doc["errors_left_out"] == {"baseline": 0, "candidate": 3}
    assert doc["overall"]["paired"]["n_cases"] == 2  # both cases have a scored trial on each side
    code, out, _ = _cli(capsys, "compare", *store, "@mock", "@mock_judge", "--eval", "smoke.reply_ok")
    assert code == 0 and "smoke.reply_ok" in out and "aiwg" not in out
    code, _, err = _cli(capsys, "compare", *store, "@mock", "@nope")
    assert code == 2 and "The candidate @nope selects no results" in err


@pytest.mark.parametrize("sql", [
    "delete from results", "drop view failures", "insert into runs (run_id) values ('x')",
    "attach database 'other.db' as other", "pragma user_version = 9", "create temp table t (x)",
    "select 1; delete from results", "pragma query_only = 0",
])
def test_query_refuses_writes_cleanly(mock_store: MockStore, sql: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "query", "--store", str(mock_store.path), sql)
    assert code == 2 and out == "" and err.startswith("error: ") and "Traceback" not in err
    assert open_store(mock_store.path, read_only=True).conn.execute(
        "select count(*) from results").fetchone()[0] == 28


def test_query_reads_tables_views_and_pragmas(mock_store: MockStore,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    store = ["--store", str(mock_store.path)]
    code, out, _ = _cli(capsys, "query", *store, "select count(*) as n from results", "--format", "csv")
    assert code == 0 and out.split() == ["n", "28"]
    sql = "select * from pragma_table_info('runs')"
    code, out, _ = _cli(capsys, "query", *store, sql, "--format", "json")
    assert code == 0 and json.loads(out)[0]["name"] == "run_id"
    code, out, _ = _cli(capsys, "query", *store, "pragma table_info(results)")
    assert code == 0 and "cell_key" in out


def test_results_lists_trials_like_zrb_list(mock_store: MockStore,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = ["--store", str(mock_store.path)]
    code, out, _ = _cli(capsys, "results", *store, mock_store.runs["flaky"], "--status", "error",
                        "--format", "json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 3 and {r["status"] for r in rows} == {"ERROR"}
    assert list(rows[0]) == ["eval", "service", "model", "case", "trial", "status", "score", "duration_s",
                             "reason", "output", "ideal"]
    code, out, _ = _cli(capsys, "results", *store, "latest", "--limit", "2")
    assert code == 0 and len(out.strip().splitlines()) == 4


@pytest.mark.slow
def test_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    """`evalhydra results latest | head -1` must not print a traceback."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "evalhydra", "trials=500", "run.progress=false"], cwd=tmp_path,
                   check=True, capture_output=True, timeout=120)
    proc = subprocess.Popen([sys.executable, "-m", "evalhydra", "results", "latest"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away before the listing is written
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in err


@pytest.mark.parametrize("args", [["--help"], ["runs", "--help"]])
def test_a_reader_that_leaves_first_gets_no_traceback(tmp_path: Path, args: list[str]) -> None:
    """`evalhydra --help | head -1`: the pipe is closed before evalhydra writes to it."""
    proc = subprocess.Popen([sys.executable, "-m", "evalhydra", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # long before the interpreter has started
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_results_show_the_output_and_the_ideal_cut_or_whole(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = open_store(tmp_path / "s.db")
    long = "word " * 40
    write_run(db, "eval-res-aaaaaaaa", [result_row("eval-res-aaaaaaaa", "c1", passed=False, output=long,
                                                    ideal="the expected answer")])
    db.close()
    store = ["--store", str(tmp_path / "s.db")]
    code, out, _ = _cli(capsys, "results", *store, "latest")
    assert code == 0 and "word word" in out and "…" in out and long not in out and "the expected" in out
    code, out, _ = _cli(capsys, "results", *store, "latest", "--full")
    assert code == 0 and long.strip() in out


def test_report_out_keeps_only_this_reports_files(mock_store: MockStore, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    args = ["report", "--store", str(mock_store.path), mock_store.runs["base"], "--out", str(tmp_path)]
    (tmp_path / "notes.txt").write_text("mine")
    assert _cli(capsys, *args, "--format", "html,junit")[0] == 0
    assert _cli(capsys, *args, "--format", "md")[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "report.md", "summary.md"]


@pytest.mark.slow
def test_run_is_the_default_command(tmp_path: Path) -> None:
    res = run_cli("run", "eval=smoke", "run.progress=false", f"store.path={tmp_path / 's.db'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "smoke.reply_ok" in res.stdout
