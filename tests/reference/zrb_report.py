"""Reference implementation (tests only): zrb-llm-evaluator's report.md, results.json and ``list``
from an in-memory experiment, rendered the way zrb does; the shipped report reads the store.

:func:`render_report_md` takes an experiment ``{id, config, results,
started_at, completed_at}`` whose results are :class:`TrialResult` dicts (or
objects) and returns the seed's report.md. It never reads the clock, so
rendering the same experiment twice gives the same bytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from evalhydra.agents.models import STATUSES, TrialResult
from evalhydra.reports.zrb import (
    PASSING,
    STATUS_ICONS,
    inline_text,
    status_label,
    summary_row,
    table_cell,
    trial_details,
    validation_score,
)

__all__ = ["list_table", "render_report_md", "results_json"]

_FAILING = frozenset({"FAIL", "TIMEOUT", "ERROR"})
_DASH = "—"

Row = dict[str, Any]


def results_json(results: Iterable[TrialResult | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return results as the seed's ``results.json`` list (seed keys only)."""
    return [_row(r) for r in results]


def _row(result: TrialResult | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(result, TrialResult):
        return result.to_dict()
    return TrialResult.from_dict(result).to_dict()


def list_table(results: Iterable[TrialResult | Mapping[str, Any]]) -> str:
    """Return the seed's ``list`` output: model, case, trial, status, duration."""
    rows = results_json(results)
    lines = [
        f"Found {len(rows)} trial(s):",
        "",
        f"{'Model':<30} {'Test Case':<20} {'Trial':<6} {'Status':<12} {'Duration':<10}".rstrip(),
        "-" * 80,
    ]
    for r in rows:
        lines.append(
            f"{r['model']:<30} {r['test_case']:<20} {r['trial_index']:<6} "
            f"{r['status']:<12} {float(r['duration']):<10.2f}".rstrip()
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- report.md


def render_report_md(experiment: Mapping[str, Any]) -> str:
    """Render the seed's report.md for ``experiment``.

    Sections: header, Overall Status, By Model, By Test Case, Grid, Stability
    (omitted when every cell has one trial), Failing / Timeout Trials, Summary
    (best values per test case in bold), Per-Trial Details.
    """
    rows = sorted(results_json(experiment.get("results") or []), key=_sort_key)
    parts = [
        _header(experiment),
        _overall(rows),
        _by_model(rows),
        _by_case(rows),
        _grid(rows),
        _stability(rows),
        _failing(rows),
        _summary(rows),
        _details(rows),
    ]
    return "".join(parts)


def _sort_key(r: Row) -> tuple[str, str, int]:
    return (r["model"], r["test_case"], r["trial_index"])








def _stamp(value: Any) -> str:
    if value is None or value == "":
        return _DASH
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _header(experiment: Mapping[str, Any]) -> str:
    started, completed = experiment.get("started_at"), experiment.get("completed_at")
    return (
        "# Experiment Report\n"
        f"- **Experiment ID**: {inline_text(experiment.get('id', ''))}\n"
        f"- **Started**: {_stamp(started)}\n"
        f"- **Completed**: {_stamp(completed)}\n"
        f"- **Generated**: {_stamp(completed or started)}\n"
        "\n"
    )


def _overall(rows: list[Row]) -> str:
    counts = _count(r["status"] for r in rows)
    lines = [
        f"**Total trials**: {len(rows)}\n",
        "\n## Overall Status\n\n",
        "| Status | Count | % |\n",
        "|--------|-------|---|\n",
    ]
    for status in STATUSES:
        if counts[status]:
            lines.append(
                f"| {status_label(status)} | {counts[status]} | {counts[status] / len(rows) * 100:.1f} |\n"
            )
    return "".join(lines)


def _count(statuses: Iterable[str]) -> defaultdict[str, int]:
    counts: defaultdict[str, int] = defaultdict(int)
    for status in statuses:
        counts[status] += 1
    return counts


def _group(rows: list[Row], key: str) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    return dict(sorted(groups.items()))


def _status_counts(rows: list[Row]) -> str:
    counts = _count(r["status"] for r in rows)
    return " | ".join(str(counts[s]) for s in STATUSES)


def _by_model(rows: list[Row]) -> str:
    lines = [
        "\n## By Model\n\n",
        "| Model | Trials | 👍 | ✅ | ❌ | ⏱️ | ⚠️ | Avg dur (s) |\n",
        "|-------|--------|----|----|----|----|----|-------------|\n",
    ]
    for model, group in _group(rows, "model").items():
        avg = sum(float(r["duration"]) for r in group) / len(group)
        lines.append(f"| {table_cell(model)} | {len(group)} | {_status_counts(group)} | {avg:.1f} |\n")
    return "".join(lines)


def _by_case(rows: list[Row]) -> str:
    lines = [
        "\n## By Test Case\n\n",
        "| Test Case | Trials | 👍 | ✅ | ❌ | ⏱️ | ⚠️ |\n",
        "|-----------|--------|----|----|----|----|----|\n",
    ]
    for case, group in _group(rows, "test_case").items():
        lines.append(f"| {table_cell(case)} | {len(group)} | {_status_counts(group)} |\n")
    return "".join(lines)


def _cells(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    cells: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        cells[(r["model"], r["test_case"])].append(r)
    return dict(sorted(cells.items()))


def _grid(rows: list[Row]) -> str:
    models = sorted({r["model"] for r in rows})
    cases = sorted({r["test_case"] for r in rows})
    cells = _cells(rows)
    header = ["Model", *(table_cell(c) for c in cases)]
    lines = [
        "\n## Grid\n\n",
        "| " + " | ".join(header) + " |\n",
        "|" + "|".join("-" * max(3, len(col)) for col in header) + "|\n",
    ]
    for model in models:
        trials = [cells.get((model, case), []) for case in cases]
        icons = [_icons(t) if t else _DASH for t in trials]
        lines.append("| " + " | ".join([table_cell(model), *icons]) + " |\n")
    return "".join(lines)


def _icons(trials: list[Row]) -> str:
    ordered = sorted(trials, key=lambda r: r["trial_index"])
    return " ".join(STATUS_ICONS.get(r["status"], "") for r in ordered)


def _stability(rows: list[Row]) -> str:
    cells = _cells(rows)
    if all(len(trials) == 1 for trials in cells.values()):
        return ""
    lines = [
        "\n## Stability\n\n",
        "Per-(model, test case) pass rate across trials. ",
        "🟢 stable = all trials passed; 🟡 flaky = mixed; 🔴 broken = none passed.\n\n",
        "| Model | Test Case | Pass Rate | Stability |\n",
        "|-------|-----------|-----------|-----------|\n",
    ]
    for (model, case), trials in cells.items():
        passed, total = sum(r["status"] in PASSING for r in trials), len(trials)
        verdict = "🟢 STABLE" if passed == total else "🔴 BROKEN" if passed == 0 else "🟡 FLAKY"
        rate = f"{passed}/{total} ({passed / total * 100:.0f}%)"
        lines.append(f"| {table_cell(model)} | {table_cell(case)} | {rate} | {verdict} |\n")
    return "".join(lines)


def _failing(rows: list[Row]) -> str:
    failing = [r for r in rows if r["status"] in _FAILING]
    lines = ["\n## Failing / Timeout Trials\n\n"]
    if not failing:
        return "".join([*lines, "No failing or timeout trials.\n"])
    lines += [
        "| Model | Test Case | Trial | Status | Duration (s) |\n",
        "|-------|-----------|-------|--------|--------------|\n",
    ]
    for r in failing:
        lines.append(
            f"| {table_cell(r['model'])} | {table_cell(r['test_case'])} | {r['trial_index']} | "
            f"{status_label(r['status'])} | {float(r['duration']):.1f} |\n"
        )
    return "".join(lines)




def _best_by_case(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Per test case, the best value of each metric among PASS/EXCELLENT trials."""
    best: dict[str, dict[str, Any]] = {}
    for case, group in _group([r for r in rows if r["status"] in PASSING], "test_case").items():
        scores = [s for s in map(validation_score, group) if s is not None]
        best[case] = {
            "duration": min(float(r["duration"]) for r in group),
            "score": max(scores) if scores else None,
            "total_tokens": min(r["total_tokens"] for r in group),
            "tool_call_count": min(r["tool_call_count"] for r in group),
        }
    return best




def _summary(rows: list[Row]) -> str:
    lines = [
        "\n## Summary\n\n",
        "| Model | Test Case | Trial | Status | Duration (s) | Score | "
        "Total Tokens | Input | Output | Cache | Tool Calls |\n",
        "|-------|-----------|-------|--------|-------------|-------|"
        "--------------|-------|--------|-------|------------|\n",
    ]
    best = _best_by_case(rows)
    lines += [summary_row(r, best.get(r["test_case"])) for r in rows]
    return "".join(lines)




def _details(rows: list[Row]) -> str:
    lines = ["\n## Per-Trial Details\n\n"]
    for r in rows:
        lines += trial_details(r)
    return "".join(lines)


