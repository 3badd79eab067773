"""CI gates: fail_under, per-eval thresholds, the top suggested fix, the GitHub step summary."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from evalhydra.analysis.gates import Gates, threshold_for
from evalhydra.analysis.targetstats import store_stats
from evalhydra.job.run import publish_run
from evalhydra.reports.summary import append_step_summary, print_run_summary, run_gate
from evalhydra.store.db import open_store
from tests.reference.summary import gate_failures, group_stats
from tests.reports.support import result_row, target_stats, write_run

RUN = "eval-gate-aaaaaaaa"

def _rows() -> list[dict[str, object]]:
    """g.a passes 3/4 (one error left out: 3/3), g.b 1/4, h.c 2/4."""
    # g.a was streamed by a reasoning model: times to first token and thinking tokens
    rows = [result_row(RUN, f"a{i}", eval_id="g.a", passed=i < 3, ttft_ms=100.0 + 50 * i,
                       first_answer_ms=400.0 + i if i else None, reasoning_tokens=7 * i)
            for i in range(3)]
    rows.append(result_row(RUN, "a3", eval_id="g.a", passed=False, status="ERROR", error_kind="timeout"))
    rows += [result_row(RUN, f"b{i}", eval_id="g.b", passed=i == 0,
                        suggested_fix="Say only the number." if i else None) for i in range(4)]
    rows += [result_row(RUN, f"c{i}", eval_id="h.c", group="h", passed=i < 2,
                        suggested_fix="Use JSON." if i == 3 else None) for i in range(4)]
    return rows

def test_threshold_prefers_eval_then_group_then_fail_under() -> None:
    stat = target_stats(eval="g.b", group="g")
    assert threshold_for(stat, 0.9, None) == 0.9
    assert threshold_for(stat, 0.9, {"g": 0.5}) == 0.5
    assert threshold_for(stat, 0.9, {"g": 0.5, "g.b": 0.2}) == 0.2
    assert threshold_for(stat, None, {"other": 0.5}) is None

def test_gate_failures_prints_the_worst_evals_and_the_top_fix(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows()
    failing = gate_failures(rows, 0.9)
    assert [f.stat.eval for f in failing] == ["g.b", "h.c"]  # g.a is 3/3: the error is left out
    err = capsys.readouterr().err
    assert "⚠ g.b on svc/m: pass rate 25.0% < 90.0%" in err
    assert "top suggested fix: Say only the number." in err
    assert [f.stat.eval for f in gate_failures(rows, None, {"h": 0.6})] == ["h.c"]
    assert gate_failures(rows, 0.9, {"g.b": 0.2, "h": 0.5}) == []

def test_the_sql_gate_equals_the_row_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows()
    store = open_store(tmp_path / "s.db")
    write_run(store, RUN, rows)
    assert [s.as_dict() for s in store_stats(store, [RUN])] == group_stats(store.run_rows([RUN]))
    for threshold, per_eval in ((0.9, None), (None, {"g": 0.8}), (0.1, None)):
        expected = gate_failures(list(store.run_rows([RUN])), threshold, per_eval)
        first = capsys.readouterr().err
        assert run_gate(store, [RUN], Gates(threshold, per_eval or {})) == expected
        assert capsys.readouterr().err == first
    store.close()

def test_the_run_summary_and_the_gate_verdict_go_to_the_github_step_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path / "s.db")
    write_run(store, RUN, _rows())
    target = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    outcome = SimpleNamespace(run_id=RUN, executed=12, skipped=0)
    failed, _ = publish_run(store, outcome, tmp_path / "out", formats=["md"], gates=Gates(0.9))  # type: ignore[arg-type]
    store.close()
    text = target.read_text()
    assert failed and text.startswith(f"### evalhydra `{RUN}`") and "| g.b" in text
    assert "**Gate failed** (2 targets under a threshold):" in text
    assert "- `g.b` on `svc/m`: pass rate 25.0% < 90.0%" in text and "Failing cases:" in text
    assert text.count("**Gate failed**") == 1
    assert "**Gate failed**" in (tmp_path / "out" / "summary.md").read_text()
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert not append_step_summary(tmp_path / "out")

def test_failing_case_reasons_are_cut_at_a_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = open_store(tmp_path / "s.db")
    reason = "the output did not match the expected answer " * 5
    write_run(store, RUN, [result_row(RUN, "c1", passed=False, failure_reason=reason)])
    print_run_summary(store, SimpleNamespace(run_id=RUN, executed=1, skipped=0), tmp_path / "out")
    store.close()
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "c1 trial 1" in ln)
    cut, sides = line.split(" (expected ", 1)  # the reason, then both sides quoted
    assert cut.endswith(" …") and cut.split(": ", 1)[1].removesuffix(" …").split()[-1] in reason.split()
    assert sides == "'c1', output 'wrong')"

