"""A run's record is history (issue 48): what a run measured stays what it measured.

The reproduction: a run whose every cell fails (500s, exit 3), then the same command healing
them; the first run's reports, results and listing must read as they did before the second.
Then a property test: random sequences of runs, reruns, rejudges and merges never change an
earlier run's report bytes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import evalhydra
from evalhydra.store.merge import merge_stores
from tests.helpers import mock_call, numbered_registry, run_cli

REPORTS = ("evals.json", "runs.json", "report.md", "summary.md", "summary.json", "results.jsonl")


def report_bytes(db: Path, run_id: str, out: Path) -> dict[str, bytes]:
    done = run_cli("report", run_id, "--store", str(db), "--format", "json,jsonl,md", "--out", str(out),
                   cwd=db.parent)
    assert done.returncode == 0, done.stderr
    return {name: (out / name).read_bytes() for name in REPORTS if (out / name).exists()}


def listing(db: Path, *command: str) -> Any:
    done = run_cli(*command, "--store", str(db), "--format", "json", cwd=db.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_healed_rerun_leaves_the_failed_runs_record_as_it_was(url: str, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    args = [f"registry={numbered_registry(tmp_path / 'reg', 12)}", "eval=g.e", "service=mock",
            "service.mock.enabled=false", f"service.base_url={url}", f"store.path={db}", "trials=2",
            "service.retry.max_attempts=1", "run.fail_fast=false"]
    mock_call(url, "config", {"fail_rate": 1.0, "fail_status": 500})
    first = evalhydra.evaluate(args)
    assert first.exit_code == 3
    run1 = str(first.run_id)
    before = report_bytes(db, run1, tmp_path / "before")
    results_before = listing(db, "results", run1)
    runs_before = {r["run_id"]: r for r in listing(db, "runs")}
    assert {r["status"] for r in results_before} == {"ERROR"} and len(results_before) == 24

    mock_call(url, "config", {"fail_rate": 0.0})
    second = evalhydra.evaluate(args)  # the same command, now healed: 24 requests, 24 new versions
    assert second.exit_code == 0 and str(second.run_id) != run1

    assert report_bytes(db, run1, tmp_path / "after") == before  # byte for byte
    assert listing(db, "results", run1) == results_before  # still the 500s it saw
    runs_after = {r["run_id"]: r for r in listing(db, "runs")}
    assert runs_after[run1] == runs_before[run1]
    assert runs_after[run1]["errors"] == 24 and runs_after[run1]["verdict"] == "could not measure"
    assert runs_after[str(second.run_id)]["errors"] == 0
    conn = sqlite3.connect(db)
    versions = conn.execute("select count(*), count(distinct cell_key) from results").fetchone()
    conn.close()
    assert versions == (48, 24)  # storage grows by the rows written, nothing copied


ACTIONS = st.lists(st.sampled_from(["fail", "heal", "rerun", "rejudge", "merge", "grow"]), min_size=2,
                   max_size=5)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS)
def test_no_later_action_changes_an_earlier_runs_report(actions: list[str], url: str,
                                                        tmp_path_factory: Any) -> None:
    """Random sequences of runs (failing, healed), reruns, rejudges, merges of a shard and grown
    evals: after each action, every run recorded before it reports the same bytes."""
    root = tmp_path_factory.mktemp("history")
    db = root / "s.db"
    registry = numbered_registry(root / "reg", 4)
    common = [f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
              f"service.base_url={url}", "service.retry.max_attempts=1", "run.fail_fast=false"]
    base = [*common, f"store.path={db}"]
    recorded: dict[str, dict[str, bytes]] = {}
    for step, action in enumerate(actions):
        mock_call(url, "config", {"fail_rate": 0.5 if action == "fail" else 0.0, "fail_status": 500})
        if action in ("fail", "heal", "rerun"):
            evalhydra.evaluate([*base, "run.retry_errors=true" if action != "rerun" else "trials=1"])
        elif action == "grow":
            evalhydra.evaluate([*base, "trials=2"])
        elif action == "rejudge" and recorded:
            run_cli("rejudge", next(iter(recorded)), "--store", str(db), cwd=root)
        elif action == "merge" and db.exists():
            shard = root / f"shard{step}.db"
            shutil.copy(db, shard)
            evalhydra.evaluate([*common, f"store.path={shard}", "trials=3"])
            merge_stores(db, [shard])
        for run_id, reports in recorded.items():  # each report in a folder of its own
            assert report_bytes(db, run_id, root / f"r{step}-{run_id}") == reports, (action, run_id)
        for run in listing(db, "runs") if db.exists() else []:
            if run["run_id"] not in recorded:
                recorded[run["run_id"]] = report_bytes(db, run["run_id"], root / f"new{step}-{run['run_id']}")
