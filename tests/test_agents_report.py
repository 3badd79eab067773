"""report.md, results.json and the list table: pure functions over TrialResult dicts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evalhydra.agents import TrialResult
from evalhydra.atomic import write_json_atomic
from tests.reference.zrb_report import list_table, render_report_md, results_json


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


def experiment(results: list[Any], **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "exp-1",
        "config": {},
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

GOLDEN = (
    "# Experiment Report\n"
    "- **Experiment ID**: exp-1\n"
    "- **Started**: 2026-01-02T03:04:05+00:00\n"
    "- **Completed**: —\n"
    "- **Generated**: 2026-01-02T03:04:05+00:00\n"
    "\n"
    "**Total trials**: 5\n"
    "\n"
    "## Overall Status\n"
    "\n"
    "| Status | Count | % |\n"
    "|--------|-------|---|\n"
    "| 👍 EXCELLENT | 1 | 20.0 |\n"
    "| ✅ PASS | 1 | 20.0 |\n"
    "| ❌ FAIL | 1 | 20.0 |\n"
    "| ⏱️ TIMEOUT | 1 | 20.0 |\n"
    "| ⚠️ ERROR | 1 | 20.0 |\n"
    "\n"
    "## By Model\n"
    "\n"
    "| Model | Trials | 👍 | ✅ | ❌ | ⏱️ | ⚠️ | Avg dur (s) |\n"
    "|-------|--------|----|----|----|----|----|-------------|\n"
    "| google:gemini | 3 | 1 | 0 | 0 | 1 | 1 | 10.8 |\n"
    "| openai:gpt-4o | 2 | 0 | 1 | 1 | 0 | 0 | 2.5 |\n"
    "\n"
    "## By Test Case\n"
    "\n"
    "| Test Case | Trials | 👍 | ✅ | ❌ | ⏱️ | ⚠️ |\n"
    "|-----------|--------|----|----|----|----|----|\n"
    "| bug-fix | 4 | 1 | 1 | 1 | 1 | 0 |\n"
    "| hello | 1 | 0 | 0 | 0 | 0 | 1 |\n"
    "\n"
    "## Grid\n"
    "\n"
    "| Model | bug-fix | hello |\n"
    "|-----|-------|-----|\n"
    "| google:gemini | 👍 ⏱️ | ⚠️ |\n"
    "| openai:gpt-4o | ✅ ❌ | — |\n"
    "\n"
    "## Stability\n"
    "\n"
    "Per-(model, test case) pass rate across trials. "
    "🟢 stable = all trials passed; 🟡 flaky = mixed; 🔴 broken = none passed.\n"
    "\n"
    "| Model | Test Case | Pass Rate | Stability |\n"
    "|-------|-----------|-----------|-----------|\n"
    "| google:gemini | bug-fix | 1/2 (50%) | 🟡 FLAKY |\n"
    "| google:gemini | hello | 0/1 (0%) | 🔴 BROKEN |\n"
    "| openai:gpt-4o | bug-fix | 1/2 (50%) | 🟡 FLAKY |\n"
    "\n"
    "## Failing / Timeout Trials\n"
    "\n"
    "| Model | Test Case | Trial | Status | Duration (s) |\n"
    "|-------|-----------|-------|--------|--------------|\n"
    "| google:gemini | bug-fix | 2 | ⏱️ TIMEOUT | 30.0 |\n"
    "| google:gemini | hello | 1 | ⚠️ ERROR | 0.5 |\n"
    "| openai:gpt-4o | bug-fix | 2 | ❌ FAIL | 3.0 |\n"
    "\n"
    "## Summary\n"
    "\n"
    "| Model | Test Case | Trial | Status | Duration (s) | Score | "
    "Total Tokens | Input | Output | Cache | Tool Calls |\n"
    "|-------|-----------|-------|--------|-------------|-------|--------------|-------|--------|-------|------------|\n"
    "| google:gemini | bug-fix | 1 | 👍 EXCELLENT | **2.00** | **1.00** | **150** | 100 | 50 | 0 | **1** |\n"
    "| google:gemini | bug-fix | 2 | ⏱️ TIMEOUT | 30.00 |  | 0 | 0 | 0 | 0 | 0 |\n"
    "| google:gemini | hello | 1 | ⚠️ ERROR | 0.50 |  | 0 | 0 | 0 | 0 | 0 |\n"
    "| openai:gpt-4o | bug-fix | 1 | ✅ PASS | **2.00** | 0.50 | **150** | 100 | 50 | 10 | 2 |\n"
    "| openai:gpt-4o | bug-fix | 2 | ❌ FAIL | 3.00 | 0.00 | 100 | 80 | 20 | 0 | 1 |\n"
    "\n"
    "## Per-Trial Details\n"
    "\n"
    "### google:gemini / bug-fix / Trial 1\n"
    "\n"
    "- **Status**: 👍 EXCELLENT\n"
    "- **Duration**: 2.00s\n"
    "- **Exit code**: 0\n"
    "- **History path**: /o/bug-fix/h.json\n"
    "- **Stdout log path**: /o/bug-fix/stdout.log\n"
    "- **Tokens**: total=150, input=100, output=50, cache=0\n"
    "- **Tool calls** (1): write\n"
    "- **Validation score**: 1.0\n"
    "  - check: ✓ msg | with newline\n"
    "\n"
    "### google:gemini / bug-fix / Trial 2\n"
    "\n"
    "- **Status**: ⏱️ TIMEOUT\n"
    "- **Duration**: 30.00s\n"
    "- **Exit code**: -1\n"
    "- **History path**: /o/bug-fix/h.json\n"
    "- **Stdout log path**: /o/bug-fix/stdout.log\n"
    "- **Tokens**: total=0, input=0, output=0, cache=0\n"
    "\n"
    "### google:gemini / hello / Trial 1\n"
    "\n"
    "- **Status**: ⚠️ ERROR\n"
    "- **Duration**: 0.50s\n"
    "- **Exit code**: 0\n"
    "- **History path**: /o/hello/h.json\n"
    "- **Stdout log path**: /o/hello/stdout.log\n"
    "- **Tokens**: total=0, input=0, output=0, cache=0\n"
    "\n"
    "### openai:gpt-4o / bug-fix / Trial 1\n"
    "\n"
    "- **Status**: ✅ PASS\n"
    "- **Duration**: 2.00s\n"
    "- **Exit code**: 0\n"
    "- **History path**: /o/bug-fix/h.json\n"
    "- **Stdout log path**: /o/bug-fix/stdout.log\n"
    "- **Tokens**: total=150, input=100, output=50, cache=10\n"
    "- **Tool calls** (2): read, write\n"
    "- **Validation score**: 0.5\n"
    "  - check: ✓ msg | with newline\n"
    "\n"
    "### openai:gpt-4o / bug-fix / Trial 2\n"
    "\n"
    "- **Status**: ❌ FAIL\n"
    "- **Duration**: 3.00s\n"
    "- **Exit code**: 0\n"
    "- **History path**: /o/bug-fix/h.json\n"
    "- **Stdout log path**: /o/bug-fix/stdout.log\n"
    "- **Tokens**: total=100, input=80, output=20, cache=0\n"
    "- **Tool calls** (1): read\n"
    "- **Validation score**: 0.0\n"
    "  - check: ✗ msg | with newline\n"
    "\n"
)


def summary_row(text: str, model: str, case: str) -> str:
    section = text.split("## Summary")[1].split("## Per-Trial Details")[0]
    return next(line for line in section.splitlines() if line.startswith(f"| {model} | {case} |"))


def test_golden_report() -> None:
    assert render_report_md(experiment(MIXED)) == GOLDEN


def test_rerender_is_byte_identical_and_order_independent() -> None:
    first = render_report_md(experiment(MIXED))
    assert render_report_md(experiment(list(reversed(MIXED)))) == first
    assert render_report_md(experiment([TrialResult.from_dict(r) for r in MIXED])) == first


def test_header_uses_completed_then_started_never_the_clock() -> None:
    done = datetime(2026, 1, 2, 4, 0, tzinfo=UTC)
    text = render_report_md(experiment([], completed_at=done))
    assert "- **Completed**: 2026-01-02T04:00:00+00:00\n- **Generated**: 2026-01-02T04:00:00+00:00\n" in text
    text = render_report_md({"id": "x", "results": []})
    assert "- **Started**: —\n- **Completed**: —\n- **Generated**: —\n" in text


def test_empty_experiment() -> None:
    text = render_report_md(experiment([]))
    assert (
        "**Total trials**: 0\n\n## Overall Status\n\n"
        "| Status | Count | % |\n|--------|-------|---|\n\n## By Model" in text
    )
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


def test_cells_escape_pipes_and_newlines() -> None:
    text = render_report_md(experiment([row("we|ird\nmodel", "c", 1, "PASS", 1.0)]))
    assert "| we\\|ird model | 1 | 0 | 1 |" in text
    assert "### we|ird model / c / Trial 1" in text
    assert "<" not in text and ">" not in text


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
