"""Numbers the store cannot hold (issue 47, items 3 and 4): integers past SQLite's 64 bits and
non-finite scores cost their cell, never the run; and a store that already holds an infinity or a
NaN (written before these checks) still reports, and its views still read.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

import evalhydra
from evalhydra.analysis.gates import Gates, failing_stats
from evalhydra.matchers.similarity import cosine
from evalhydra.store.db import Batch, open_store
from evalhydra.store.rows import ResultRow, checked_row
from tests.conftest import smoke_eval, write_registry
from tests.helpers import numbered_registry, run_cli
from tests.reports.support import target_stats


def strict_json_has_no(name: str) -> None:
    raise AssertionError(f"a report holds {name}, which JSON has not")


def custom_registry(root: Path, body: str, cases: int = 2) -> Path:
    (root / "hostile_scores.py").parent.mkdir(parents=True, exist_ok=True)
    (root / "hostile_scores.py").write_text(f"def score(ctx, **kwargs):\n    return {body}\n")
    lines = "".join(json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}.", "ideal": f"V{i}"}) + "\n"
                    for i in range(cases))
    matcher = {"kind": "custom", "_target_": "hostile_scores.score"}
    return write_registry(root, evals={"g/e.json": smoke_eval("g.e", matcher=matcher)},
                          data={"data/g/e/test.jsonl": lines})


def test_a_custom_matchers_non_finite_score_is_its_error_and_no_gate_passes_on_it(tmp_path: Path) -> None:
    registry = custom_registry(tmp_path, "{'passed': True, 'score': float('nan')}")
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                                 "run.fail_under=0.5"])
    rows = list(result.rows())
    assert len(rows) == 2 and all(r["status"] == "FAIL" and r["passed"] == 0 for r in rows)
    said = "the matcher raised ValueError: custom matcher score must be a number in [0, 1], got nan"
    assert all(r["failure_reason"] == said for r in rows)
    assert result.exit_code == 1  # the matcher's failure counts against the rate: no gate passes


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_grader_score_is_the_matchers_error(bad: float) -> None:
    base = ResultRow.from_mapping({"cell_key": "k", "run_id": "r", "group": "g", "eval_id": "g.e",
                                   "service_name": "s", "model": "m", "run_index": 0, "case_id": "c",
                                   "kind": "chat", "status": "PASS", "passed": True, "score": 1.0})
    for row in (replace(base, score=bad), replace(base, grader_scores={"g": {"score": bad, "passed": True}})):
        checked = checked_row(row)
        assert (checked.status, checked.passed, checked.error_kind) == ("ERROR", False, "matcher_error")
        assert checked.score in (None, 1.0) and checked.grader_scores is None
        assert "not a finite number" in str(checked.failure_reason)


def test_cosine_of_vectors_near_the_float_range_is_a_number() -> None:
    assert cosine([1e200, 1e200], [1e200, 1e200]) == pytest.approx(1.0)
    assert cosine([1e308, 1e308], [1e308, 1e308]) == pytest.approx(1.0)  # the campaign's vectors (R6)
    assert cosine([1e308, 1e308], [1e308, -1e308]) == pytest.approx(0.0, abs=1e-12)
    assert cosine([1e308, 1e308], [-1e308, -1e308]) == pytest.approx(-1.0)
    assert cosine([1e-300, 0.0], [0.0, 1e-300]) == 0.0


def test_a_nan_pass_rate_never_passes_a_gate() -> None:
    stat = target_stats(pass_rate=math.nan)
    assert [f.metric for f in failing_stats([stat], Gates(0.5, {}, None, None))] == ["pass rate"]


def test_a_number_past_64_bits_from_any_path_keeps_the_cell_as_an_error(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    base = {"cell_key": "k", "run_id": "r", "group": "g", "eval_id": "g.e", "service_name": "s", "model": "m",
            "run_index": 0, "case_id": "c", "kind": "chat", "status": "PASS", "passed": True, "score": 1.0}
    store.write(Batch(results=[ResultRow.from_mapping({**base, "prompt_tokens": 2**64}),
                               ResultRow.from_mapping({**base, "cell_key": "k2", "case_id": "c2",
                                                       "prompt_tokens": 5})]))
    rows = {r[0]: r[1:] for r in store.conn.execute(
        "select case_id, status, error_kind, prompt_tokens, failure_reason from results")}
    store.close()
    assert rows["c2"] == ("PASS", None, 5, None)
    assert rows["c"][:3] == ("ERROR", "invalid_response", None) and "prompt_tokens=" in rows["c"][3]


@pytest.mark.slow
def test_reports_and_views_read_a_store_already_holding_non_finite_numbers(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result = evalhydra.evaluate([f"registry={numbered_registry(tmp_path / 'reg', 3)}", "eval=g.e",
                                 f"store.path={db}"])
    conn = sqlite3.connect(db)  # what an older evalhydra could write
    with conn:
        conn.execute("update results set score = 9e999, cost_usd = -9e999,"
                     " grader_scores = '{\"g\": {\"score\": NaN, \"passed\": 1}}' where case_id = 'c0'")
        conn.execute("update results set grader_scores = '{\"g\": {\"score\": 0.5, \"passed\": 1}}'"
                     " where case_id != 'c0'")
    conn.close()
    out = tmp_path / "out"
    done = run_cli("report", str(result.run_id), "--store", str(db), "--format", "json,jsonl,md,html,junit",
                   "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    texts = [p.read_text() for p in out.rglob("*.json")]
    texts += [line for p in out.rglob("*.jsonl") for line in p.read_text().splitlines()]
    assert len(texts) > 5
    for text in texts:
        json.loads(text, parse_constant=strict_json_has_no)
    for command in (["runs"], ["results", str(result.run_id)], ["query", "select * from grader_stats"]):
        listed = run_cli(*command, "--store", str(db), cwd=tmp_path)
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, (command, listed.stderr)
    conn = sqlite3.connect(db)
    stats = conn.execute("select grader, results, mean_score from grader_stats").fetchall()
    conn.close()
    assert stats == [("g", 2, 0.5)]  # the unreadable criterion is left out, the view reads
    assert not math.isnan(stats[0][2])
