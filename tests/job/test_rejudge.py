"""Re-judging: stored outputs scored again as a new, linked run; the candidate is never called."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from evalhydra.cli.rejudge import main
from evalhydra.core.errors import EvalHydraError
from evalhydra.execute.rejudge_cell import rejudge_cell_key
from evalhydra.job.rejudge import merge_overrides, rejudge
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from tests.conftest import smoke_eval, write_registry
from tests.e2e.test_judges_e2e import stored_rows
from tests.helpers import chat_requests, mock_process

Compose = Callable[..., DictConfig]


def _registry(root: Path, judge_url: str) -> Path:
    services = [{"name": "judge_proc", "base_url": judge_url, "default_model": "proc-judge",
                 "timeout_ms": 10000}]
    graded = smoke_eval("g.graded", "data/g/graded.jsonl", matcher={
        "kind": "model_grade", "judge_service": "judge_proc", "rubric": "The ideal answer, exactly."})
    text = smoke_eval("g.text", "data/g/text.jsonl")  # exact_match, case-sensitive
    evals = {"g/graded.json": graded, "g/text.json": text}
    return write_registry(root, services=services, evals=evals, data={
        "data/g/graded.jsonl": '{"id":"err","input":"Reply with exactly Paris.","ideal":"Paris"}\n'
                               '{"id":"paris","input":"Reply with exactly Paris.","ideal":"Paris"}\n'
                               '{"id":"london","input":"Reply with exactly London.","ideal":"Paris"}\n',
        "data/g/text.jsonl": '{"id":"exact","input":"Reply with exactly OK.","ideal":"OK"}\n'
                             '{"id":"inside","input":"Reply with exactly The answer is OK.","ideal":"OK"}\n'
                             '{"id":"wrong","input":"Reply with exactly nope.","ideal":"OK"}\n',
    })


def _runs(db: Path) -> dict[str, dict[str, object]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return {r["run_id"]: dict(r) for r in conn.execute("select * from runs")}
    finally:
        conn.close()


def _verdicts(rows: dict[tuple[str, str], dict[str, object]]) -> dict[tuple[str, str], str]:
    return {key: str(row["status"]) for key, row in rows.items()}


ORIGINAL = {("g.graded", "err"): "ERROR", ("g.graded", "paris"): "PASS", ("g.graded", "london"): "FAIL",
            ("g.text", "exact"): "PASS", ("g.text", "inside"): "FAIL", ("g.text", "wrong"): "FAIL"}


@pytest.mark.slow
def test_rejudge_scores_stored_outputs_again_as_a_linked_run(compose: Compose, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "store.db"
    with mock_process("--fail-first-n", "1") as cand_url, mock_process() as judge_url:
        overrides = [f"registry={_registry(tmp_path / 'reg', judge_url)}", "eval=g", "service=mock",
                     "service.mock.enabled=false", f"service.base_url={cand_url}", "run.concurrency=1"]
        assert run_plan(build_plan(compose(*overrides), overrides), output_dir=tmp_path / "r0") == 0
        (parent,) = _runs(db)
        original = stored_rows(db, parent)
        assert _verdicts(original) == ORIGINAL  # the first candidate call failed (500)
        assert (chat_requests(cand_url), chat_requests(judge_url)) == (6, 2)

        # matcher=includes: deterministic, so nobody is called; "The answer is OK" now passes
        by_includes = rejudge(db, parent, ["matcher=includes"]).run_id
        assert (chat_requests(cand_url), chat_requests(judge_url)) == (6, 2)
        rows = stored_rows(db, by_includes)
        assert _verdicts(rows) == {**ORIGINAL, ("g.text", "inside"): "PASS"}
        runs = _runs(db)
        assert runs[by_includes]["parent_run_id"] == parent and runs[by_includes]["status"] == "completed"
        assert json.loads(str(runs[by_includes]["overrides"])) == [*overrides, "matcher=includes"]
        assert (runs[by_includes]["cells_total"], runs[by_includes]["cells_run"]) == (6, 6)
        for key, row in rows.items():
            before = original[key]
            assert row["cell_key"] != before["cell_key"] and row["run_id"] == by_includes
            assert (row["output"], row["tool_calls"], row["model"], row["run_index"]) == (
                before["output"], before["tool_calls"], before["model"], before["run_index"])
            assert row["details"]["rejudge"]["parent_cell_key"] == before["cell_key"]
            assert row["details"]["rejudge"]["parent_passed"] is bool(before["passed"])
            assert row["cost_usd"] == 0.0 and row["judge_service"] is None
        # the failed generation has nothing to judge: copied with its error
        err = rows[("g.graded", "err")]
        assert (err["error_kind"], err["failure_reason"], err["status_code"]) == (
            "server_error", "mock failure", 500)
        assert err["details"]["rejudge"]["skipped"] == "the candidate call failed; nothing to judge"

        # the run's own matchers again: the judge is called (only the judge), verdicts repeat
        again = [rejudge(db, parent, []).run_id for _ in range(2)]
        assert (chat_requests(cand_url), chat_requests(judge_url)) == (6, 2 + 2 * 2)
        first, second = (stored_rows(db, run_id) for run_id in again)
        assert _verdicts(first) == _verdicts(second) == ORIGINAL
        assert {r["cell_key"] for r in first.values()}.isdisjoint(r["cell_key"] for r in second.values())
        graded = first[("g.graded", "london")]
        assert (graded["judge_service"], graded["judge_model"], graded["judge_status_code"]) == (
            "judge_proc", "proc-judge", 200)
        assert (graded["judge_attempt_count"], graded["attempt_count"], graded["score"]) == (1, 2, 0.0)
        assert graded["failure_reason"] == "Candidate output does not match the ideal answer."

        # a re-judge of a re-judge: its overrides build on the parent's
        back = rejudge(db, by_includes[:22], ["matcher=exact_match"]).run_id
        assert _runs(db)[back]["parent_run_id"] == by_includes
        assert json.loads(str(_runs(db)[back]["overrides"])) == [*overrides, "matcher=exact_match"]
        assert _verdicts(stored_rows(db, back)) == ORIGINAL
        assert stored_rows(db, back)[("g.graded", "err")]["error_kind"] == "server_error"

        # an unknown judge fails before any call, and no run is recorded
        known = set(_runs(db))
        with pytest.raises(EvalHydraError, match=r"(?s)Judge service 'nope' not found.*judge_proc"):
            rejudge(db, parent, ["judge_service=nope"])
        assert set(_runs(db)) == known
        assert (chat_requests(cand_url), chat_requests(judge_url)) == (6, 6)

        # the CLI: RUN_ID (or latest), --store, overrides; reports of the new run
        capsys.readouterr()
        assert main(["latest", "--store", str(db), "matcher=includes", "--out", str(tmp_path / "out")]) == 0
        out = capsys.readouterr().out
        assert f"rejudged {back} -> " in out and "1 verdict(s) changed" in out
        assert (tmp_path / "out" / "runs.json").exists()
        assert main(["nope", "--store", str(db)]) == 2
        assert "Run 'nope' not found" in capsys.readouterr().err
        assert (chat_requests(cand_url), chat_requests(judge_url)) == (6, 6)


def test_merge_overrides_replaces_keys_and_cell_keys_are_unique_per_run() -> None:
    assert merge_overrides(["matcher=exact_match", "trials=2", "+service.headers.X=1"],
                           ["matcher=includes", "service.headers.X=2"]) == [
        "trials=2", "matcher=includes", "service.headers.X=2"]
    assert rejudge_cell_key("k", "m", "run-a") != rejudge_cell_key("k", "m", "run-b")
    assert rejudge_cell_key("k", "m", "run-a") != rejudge_cell_key("k", "m2", "run-a")
    assert len(rejudge_cell_key("k", "m", "run-a")) == 32


def test_rejudge_finishes_like_a_run_exit_3_and_its_exit_code_stored(
        compose: Compose, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run whose cells all errored could not measure (exit 3); so can a re-judge of it, which
    copies those errors: it says so, exits 3 and stores its exit code as a run does."""
    db = tmp_path / "store.db"
    plan = build_plan(compose("eval=smoke", "service.mock.fail_rate=1.0", "service.retry.max_attempts=1",
                              f"store.path={db}"))
    assert run_plan(plan) == 3
    parent = next(iter(_runs(db)))
    capsys.readouterr()
    assert main([parent, "--store", str(db), "--out", str(tmp_path / "out")]) == 3
    assert "error: could not measure" in capsys.readouterr().err
    child = next(r for r in _runs(db).values() if r["parent_run_id"] == parent)
    assert (child["exit_code"], _runs(db)[parent]["exit_code"]) == (3, 3)
