"""report.md, results.json and the list table: pure functions over TrialResult dicts."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evalhydra.agents import TrialResult
from evalhydra.reports.atomic import write_json_atomic
from evalhydra.reports.zrb_markdown import render_zrb_report
from tests.reference.zrb_report import list_table, results_json


def row(
    model: str,
    case: str,
    trial: int,
    status: str,
    duration: float,
    score: float | None = None,
    tokens: tuple[int, int, int, int] = (0, 0, 0, 0),
    tools: tuple[str, ...] = (),
) -> dict[str, Any]:
    verdict = None
    if score is not None:
        check = {"name": "check", "passed": score > 0, "message": "msg | with\nnewline"}
        verdict = {
            "status": status if status in ("EXCELLENT", "FAIL") else "PASS",
            "score": score,
            "details": [check],
        }
    exit_code = -1 if status == "TIMEOUT" else 0
    result = TrialResult(
        model, case, trial, status, duration, exit_code, f"/o/{case}/h.json", f"/o/{case}/stdout.log",
        verdict, *tokens, list(tools), len(tools), id=f"id{trial}",
    )  # fmt: skip
    return result.to_dict()


def render_report_md(experiment: dict[str, Any]) -> str:
    """evalhydra's zrb report.md, checked against zrb-llm-evaluator's own renderer (a test extra)."""
    ours = render_zrb_report(experiment)
    zrb_models = pytest.importorskip("zrb_llm_evaluator.models")
    zrb_reporter = pytest.importorskip("zrb_llm_evaluator.reporter")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "report.md"
        zrb_reporter.generate_markdown_report(zrb_models.Experiment.model_validate(experiment), target)
        assert ours == target.read_text(encoding="utf-8")
    return ours


def experiment(results: list[Any], **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "exp-1",
        "config": {"models": ["m:x"], "test_case_dirs": ["c"], "cli_name": "zrb", "cli_version": "zrb 1.2"},
        "started_at": "2026-01-02T03:04:05+00:00",
        "completed_at": None,
    }
    return {**base, "results": results, **extra}


MIXED = [
    row("openai:gpt-4o", "bug-fix", 2, "FAIL", 3.0, 0.0, (100, 80, 20, 0), ("read",)),
    row("openai:gpt-4o", "bug-fix", 1, "PASS", 2.0, 0.5, (150, 100, 50, 10), ("read", "write")),
    row("google:gemini", "bug-fix", 1, "EXCELLENT", 2.0, 1.0, (150, 100, 50, 0), ("write",)),
    row("google:gemini", "bug-fix", 2, "TIMEOUT", 30.0),
    row("google:gemini", "hello", 1, "ERROR", 0.5),
]

def summary_row(text: str, model: str, case: str) -> str:
    section = text.split("## Summary")[1].split("## Per-Trial Details")[0]
    return next(line for line in section.splitlines() if line.startswith(f"| {model} | {case} |"))


def test_the_report_is_zrbs_own_document() -> None:
    text = render_report_md(experiment(MIXED))  # equal to zrb-llm-evaluator 0.1.13's rendering
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == ["## Overall Status", "## Leaderboard", "## By Model", "## By Test Case", "## Grid",
                        "## Stability", "## Failing / Timeout Trials", "## Summary", "## Per-Trial Details"]
    assert "- **Zrb Version**: zrb 1.2\n" in text
    assert "| Model | Trials | 👍 | ✅ | ❌ | ⏱️ | ⚠️ | Input Tokens | Output Tokens | Avg dur (s) |" in text


def test_rerender_is_byte_identical_and_order_independent() -> None:
    first = render_report_md(experiment(MIXED))
    assert render_report_md(experiment(list(reversed(MIXED)))) == first
    assert render_report_md(experiment([TrialResult.from_dict(r).to_dict() for r in MIXED])) == first


def test_header_uses_completed_then_started_never_the_clock() -> None:
    done = datetime(2026, 1, 2, 4, 0, tzinfo=UTC)
    text = render_report_md(experiment([], completed_at=done.isoformat()))
    assert "- **Completed**: 2026-01-02T04:00:00+00:00\n- **Generated**: 2026-01-02T04:00:00+00:00\n" in text


def test_empty_experiment() -> None:
    text = render_report_md(experiment([]))
    assert "**Total trials**: 0\n\n## Overall Status\n\n| Status | Count | % |\n|--------|-------|---|\n" in (
        text)
    assert "## Grid\n\n| Model |\n|-----|\n\n## Failing" in text
    assert "## Stability" not in text
    assert "## Failing / Timeout Trials\n\nNo failing or timeout trials.\n" in text


def test_stability_hidden_when_every_cell_has_one_trial() -> None:
    results = [
        row("m:a", "c1", 1, "PASS", 1.0),
        row("m:a", "c2", 1, "FAIL", 1.0),
        row("m:b", "c1", 1, "PASS", 1.0),
    ]
    text = render_report_md(experiment(results))
    assert "## Stability" not in text
    assert "| m:b | ✅ | — |" in text  # grid em dash for the empty cell


def test_stability_verdicts() -> None:
    results = [row("m:a", "c", i, s, 1.0) for i, s in enumerate(["PASS", "EXCELLENT", "PASS"], 1)]
    results += [row("m:b", "c", i, s, 1.0) for i, s in enumerate(["FAIL", "ERROR"], 1)]
    text = render_report_md(experiment(results))
    assert "| m:a | c | 3/3 (100%) | 🟢 STABLE |" in text
    assert "| m:b | c | 0/2 (0%) | 🔴 BROKEN |" in text


def test_bold_best_per_case_counts_only_passing_trials_and_bolds_ties() -> None:
    results = [
        row("m:a", "c", 1, "PASS", 5.0, 0.9, (300, 200, 100, 0), ("x", "y")),
        row("m:b", "c", 1, "EXCELLENT", 5.0, 0.9, (200, 150, 50, 0), ("x", "y", "z")),
        row("m:c", "c", 1, "FAIL", 1.0, 1.0, (10, 5, 5, 0), ()),
        row("m:a", "other", 1, "FAIL", 1.0, 0.0, (10, 5, 5, 0), ()),
    ]
    text = render_report_md(experiment(results))
    assert summary_row(text, "m:a", "c").endswith(
        "| ✅ PASS | **5.00** | **0.90** | 300 | 200 | 100 | 0 | **2** |"
    )
    assert summary_row(text, "m:b", "c").endswith(
        "| 👍 EXCELLENT | **5.00** | **0.90** | **200** | 150 | 50 | 0 | 3 |"
    )
    assert summary_row(text, "m:c", "c").endswith("| ❌ FAIL | 1.00 | 1.00 | 10 | 5 | 5 | 0 | 0 |")
    assert "**" not in summary_row(text, "m:a", "other")


def test_labels_are_written_as_zrb_writes_them() -> None:
    text = render_report_md(experiment([row("we|ird", "c", 1, "PASS", 1.0)]))  # zrb escapes nothing
    assert "| we|ird | 1 | 0 | 1 |" in text and "### we|ird / c / Trial 1" in text


def test_results_json_and_atomic_write(tmp_path: Path) -> None:
    rows = results_json([TrialResult.from_dict(MIXED[0]), {**MIXED[1], "cost_usd": 1.0}])
    assert rows == MIXED[:2]
    target = tmp_path / "out" / "results.json"
    write_json_atomic(target, rows)
    write_json_atomic(target, rows)
    assert json.loads(target.read_text()) == rows
    assert target.read_text().startswith("[\n  {\n")
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.json"]


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    write_json_atomic(target, [1])
    with pytest.raises(TypeError):
        write_json_atomic(target, {1j: "complex keys are not JSON"})
    assert json.loads(target.read_text()) == [1]
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_list_table() -> None:
    text = list_table(MIXED[:2])
    assert text.splitlines() == [
        "Found 2 trial(s):",
        "",
        "Model                          Test Case            Trial  Status       Duration",
        "-" * 80,
        "openai:gpt-4o                  bug-fix              2      FAIL         3.00",
        "openai:gpt-4o                  bug-fix              1      PASS         2.00",
    ]
