"""report.md and summary.md: sections, escaping, caps, zrb's bold best values, agent trials."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalhydra.analysis import aggregate
from evalhydra.reports.writer import write_run_reports
from evalhydra.store.db import open_store
from tests.reports.support import MockStore, mock_store, result_row, write_run

__all__ = ["mock_store"]

NASTY = "a | b\nsecond line <script>alert(1)</script> `x` **y**"
ZRB_SECTIONS = ["## Overall Status", "## By Model", "## By Test Case", "## Grid",
                "## Failing / Timeout Trials", "## Summary", "## Per-Trial Details"]


def _md(tmp_path: Path, rows: list[dict[str, object]], run_id: str = "eval-md-aaaaaaaa") -> str:
    store = open_store(tmp_path / "s.db")
    write_run(store, run_id, rows)
    write_run_reports(store, [run_id], tmp_path / "out", formats=["md"], cumulative=False)
    store.close()
    return (tmp_path / "out" / "report.md").read_text()


def _squash(text: str) -> str:
    """Table padding removed: runs of spaces become one."""
    return re.sub(r" {2,}", " ", text)


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def _tables(text: str) -> list[list[str]]:
    tables: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_a_nasty_output_cannot_break_any_table(tmp_path: Path) -> None:
    rows = [result_row("eval-md-aaaaaaaa", "c|1", t, passed=False, output=NASTY, failure_reason=NASTY,
                       model="m<b>|x") for t in (1, 2)]
    text = _md(tmp_path, rows)
    assert "<script>" not in text and "&lt;script&gt;" in text
    for table in _tables(text):
        width = _unescaped_pipes(table[0])
        assert all(_unescaped_pipes(line) == width for line in table), table
    assert "second line" in text and "a \\| b" in text


def test_sections_and_stability_only_with_repeated_trials(tmp_path: Path) -> None:
    one = _md(tmp_path / "one", [result_row("eval-md-aaaaaaaa", f"c{i}") for i in range(3)])
    for section in ["## Results", *ZRB_SECTIONS]:
        assert section in one
    assert "## Stability" not in one and "## Trials" not in one
    flaky = [result_row("eval-md-aaaaaaaa", "c1", t, passed=t != 2) for t in (1, 2, 3)]
    many = _md(tmp_path / "many", flaky)
    assert "## Stability" in many and "🟡 FLAKY" in many and "2/3 (67%)" in many
    assert "## Trials" in many and "pass@3" in many and "| ✅ ❌ ✅ |" in _squash(many)


def test_regeneration_is_byte_identical_and_clock_free(mock_store: MockStore, tmp_path: Path) -> None:
    store = open_store(mock_store.path, read_only=True)
    ids = list(mock_store.runs.values())
    write_run_reports(store, ids, tmp_path / "a", formats=["md"], cumulative=False)
    write_run_reports(store, ids, tmp_path / "b", formats=["md"], cumulative=False)
    finished = max(r["finished_at"] for r in store.runs(ids))
    store.close()
    for name in ("report.md", "summary.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    text = (tmp_path / "a" / "report.md").read_text()
    assert f"- **Generated**: {finished}" in text
    assert "## Baseline comparisons" in text and "newcombe" not in text.lower().split("paired δ")[0]
    assert "mock_judge" in text and "Paired Δ [95% CI]" in text


def test_best_values_per_case_are_bold_among_passing_trials(tmp_path: Path) -> None:
    rows = [result_row("eval-md-aaaaaaaa", "c1", 1, latency_ms=900, completion_tokens=9),
            result_row("eval-md-aaaaaaaa", "c1", 2, latency_ms=300),
            result_row("eval-md-aaaaaaaa", "c1", 3, passed=False, latency_ms=100)]
    text = _md(tmp_path, rows)
    summary = text.split("## Summary")[1].split("## Per-Trial Details")[0]
    lines = [line for line in summary.splitlines() if line.startswith("| svc/m")]
    assert "| **0.30** |" in lines[1] and "| 0.90 |" in lines[0]  # fastest passing trial
    assert "| 0.10 |" in lines[2]  # the failing trial is never bold
    assert "| **6** |" in lines[1] and "| 14 |" in lines[0]  # fewest tokens


def test_large_runs_are_capped_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aggregate, "CAP_TRIALS", 4)
    monkeypatch.setattr(aggregate, "CAP_CASES", 3)
    monkeypatch.setattr(aggregate, "CAP_GRID", 2)
    rows = [result_row("eval-md-aaaaaaaa", f"c{i:02d}", t, passed=(i + t) % 3 > 0)
            for i in range(10) for t in (1, 2)]
    text = _md(tmp_path, rows)
    assert text.count("### svc/m / g.e/") == 4
    assert "_Showing the first 4 of 20 trials" in text
    assert "_Showing the first 3 of 10 test cases" in text
    assert "_Showing the first 2 of 10 test cases (columns)" in text
    assert "_Showing the first 3 of 10 (model, test case) cells" in text


def test_agent_trials_use_zrb_details(tmp_path: Path) -> None:
    verdict = {"status": "EXCELLENT", "score": 0.9,
               "details": [{"name": "file_exists", "passed": True, "message": "ok"}]}
    row = result_row("eval-md-aaaaaaaa", "fix-bug", kind="agent", status="EXCELLENT", duration_s=12.5,
                     exit_code=0, log_path="/t/history.json", score=0.9,
                     details={"verification_result": verdict, "tool_call_count": 1},
                     tool_calls=[{"name": "write_file", "args": {}}])
    timeout = result_row("eval-md-aaaaaaaa", "fix-bug", 2, passed=False, kind="agent", status="TIMEOUT",
                         error_kind="timeout", duration_s=300.0, exit_code=-1, log_path="/t/h2.json")
    text = _md(tmp_path, [row, timeout])
    assert "| 👍 EXCELLENT | 1 | 50.0 |" in _squash(text) and "⏱️ TIMEOUT" in text
    assert "- **Exit code**: 0" in text and "- **Validation score**: 0.9" in text
    assert "  - file_exists: ✓ ok" in text and "- **Tool calls** (1): write_file" in text
    assert "| svc/m | 2 | 1 | 0 | 0 | 1 | 0 | 156.2 |" in _squash(text)  # By Model, zrb columns
    assert text.count("- **Validation score**") == 1  # the timeout has no verification result


def test_summary_md_is_short_and_lists_significant_regressions(tmp_path: Path) -> None:
    from tests.reports.support import regression_store

    store = regression_store(tmp_path / "s.db")
    ids = ["eval-base-aaaaaaaa", "eval-cand-bbbbbbbb"]
    for run_id, model in zip(ids, ("m-base", "m-cand"), strict=True):
        store.conn.execute("update results set model = ? where run_id = ?", (model, run_id))
    write_run_reports(store, ids, tmp_path / "out", formats=["md"], cumulative=False)
    store.close()
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary.startswith("### evalhydra `eval-base-aaaaaaaa`, `eval-cand-bbbbbbbb`: 75.0% passed")
    assert "**Significant regressions**" in summary and "🔻 worse" in summary
    assert len(summary.splitlines()) < 20


def test_a_difference_that_rounds_to_zero_is_shown_as_plus_zero() -> None:
    # A floating-point sum of differences can end at -1e-17: shown as "-0.000" it reads as a loss.
    from evalhydra.reports.html import _environment
    from evalhydra.reports.markdown import comparison_table

    tiny = -1e-17
    paired = {"n_cases": 3, "difference": tiny, "ci_low": -0.2, "ci_high": 0.2, "p_value": 1.0,
              "p_holm": 1.0, "regressed": [], "improved": [], "judge_flips": [],
              "verdict": "no significant change"}
    row = {"eval_id": "e", "target_kind": "model", "baseline_name": "a", "candidate_name": "b",
           "baseline_pass_rate": 0.5, "candidate_pass_rate": 0.5, "delta_pass_rate": tiny,
           "delta_ci_low": -0.2, "delta_ci_high": tiny, "paired": paired}
    table = comparison_table([row])
    html = _environment().from_string(
        '{% import "parts.html.j2" as parts %}{{ parts.comparisons(rows, none) }}').render(rows=[row])
    for shown in (table, html):  # in percentage points
        assert "-0.0 " not in shown and "-0.0]" not in shown and "+0.0 [-20.0, +20.0]" in shown
    assert "| +0.0 " in table and "[-20.0, +0.0]" in table


def test_compare_shows_one_unit_per_row_and_json_carries_the_same_numbers(tmp_path: Path) -> None:
    """Issue 60, item 7: rates in percent, every difference and interval in percentage points, in
    the text table and in ``--format json``'s ``points``."""
    import json

    from evalhydra.analysis.comparison import Target, compare
    from evalhydra.reports.comparison import render
    from tests.reports.support import regression_store

    store = regression_store(tmp_path / "s.db", cases=20, broken=7)
    result = compare(store.conn, Target("base", ("eval-base-aaaaaaaa",)),
                     Target("cand", ("eval-cand-bbbbbbbb",)))
    store.close()
    text, document = render(result, "text"), json.loads(render(result, "json"))
    row = next(line for line in text.splitlines() if line.startswith("g.e "))
    numbers = [float(n) for n in re.findall(r"[-+]?\d+\.\d", row.split("run", 1)[1])]
    points = document["comparisons"][0]["points"]
    assert numbers[:8] == [points["baseline_pct"], points["candidate_pct"], points["delta_pp"],
                           *points["delta_ci_pp"], points["paired_delta_pp"], *points["paired_ci_pp"]]
    assert points["delta_pp"] == points["paired_delta_pp"] == -35.0  # 7 of 20 cases fail every trial
    assert "(pp)" in text.splitlines()[3] and "0.350" not in text
