"""zrb-llm-evaluator 0.1.13's ``report.md``, rendered from an ``experiment.json`` document.

The same bytes as ``zrb-llm-evaluator report --dir`` writes for that document
(tests render both and compare): the header bullets, then Overall Status,
Leaderboard, By Model, By Test Case, Grid, Stability (only when some cell has
more than one trial), Failing / Timeout Trials, Summary (the best duration,
score, total tokens and tool calls of each case bold, among PASS and EXCELLENT
trials) and Per-Trial Details. Trials are ordered by (model, test case, trial).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from evalhydra.core.text import visible
from evalhydra.core.values import PASSING, STATUSES
from evalhydra.reports.zrb import STATUS_ICONS, trial_details

__all__ = ["failing_section", "render_zrb_report"]

Trial = Mapping[str, Any]

_FAILING = frozenset({"FAIL", "TIMEOUT", "ERROR"})
_DASH = "—"


def render_zrb_report(experiment: Mapping[str, Any]) -> str:
    """zrb's ``report.md`` for an experiment document (``id``, ``config``, ``results``, times)."""
    trials = sorted(experiment["results"], key=_trial_order)
    parts = [
        _header(experiment),
        _overall(trials),
        _leaderboard(trials),
        _by_model(trials),
        _by_case(trials),
        _grid(trials),
        _stability(trials),
        _failing(trials),
        _summary(trials),
        _details(trials),
    ]
    return visible("".join(parts))  # control characters from agents spelled out


def _trial_order(trial: Trial) -> tuple[str, str, int]:
    return (trial["model"], trial["test_case"], trial["trial_index"])


def _icon_status(status: str) -> str:
    icon = STATUS_ICONS.get(status, "")
    return f"{icon} {status}" if icon else status


def _score(trial: Trial) -> float | None:
    verdict = trial.get("verification_result")
    return float(verdict["score"]) if verdict is not None else None


def _time(value: str | None) -> str:
    """An ISO time as Python's ``datetime.isoformat`` writes it (zrb parses, then prints)."""
    return datetime.fromisoformat(value).isoformat() if value else _DASH


def _header(experiment: Mapping[str, Any]) -> str:
    started, completed = experiment.get("started_at"), experiment.get("completed_at")
    lines = [
        "# Experiment Report\n",
        f"- **Experiment ID**: {experiment['id']}\n",
        f"- **Started**: {_time(started)}\n",
        f"- **Completed**: {_time(completed)}\n",
        f"- **Generated**: {_time(completed or started)}\n",
    ]
    config = experiment["config"]
    if config.get("cli_version"):
        lines.append(f"- **{config['cli_name'].title()} Version**: {config['cli_version']}\n")
    return "".join(lines) + "\n"


def _counts(trials: Iterable[Trial]) -> Counter[str]:
    return Counter(trial["status"] for trial in trials)


def _status_cells(counts: Counter[str]) -> str:
    return " | ".join(str(counts[status]) for status in STATUSES)


def _overall(trials: list[Trial]) -> str:
    counts = _counts(trials)
    rows = [
        f"| {_icon_status(s)} | {counts[s]} | {counts[s] / len(trials) * 100.0:.1f} |\n"
        for s in STATUSES
        if counts[s]
    ]
    return (
        f"**Total trials**: {len(trials)}\n\n## Overall Status\n\n| Status | Count | % |\n"
        "|--------|-------|---|\n" + "".join(rows)
    )


def _by(trials: list[Trial], key: str) -> dict[str, list[Trial]]:
    groups: dict[str, list[Trial]] = defaultdict(list)
    for trial in trials:
        groups[trial[key]].append(trial)
    return groups


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _leaderboard(trials: list[Trial]) -> str:
    models = _by(trials, "model")
    scores = {m: [s for t in ts if (s := _score(t)) is not None] for m, ts in models.items()}

    def rank(model: str) -> tuple[float, int, float]:
        counts = _counts(models[model])
        passing = counts["EXCELLENT"] + counts["PASS"]
        return (-passing / len(models[model]), -counts["EXCELLENT"], -_mean(scores[model]))

    lines = [
        "\n## Leaderboard\n\nSorted by pass rate, then EXCELLENT count, then avg score.\n\n",
        "| # | Model | Avg Score | Pass % | n | 👍 | ✅ | ❌ | ⏱️ | ⚠️ |\n",
        "|---|-------|-----------|--------|---|----|----|----|----|----|\n",
    ]
    for place, model in enumerate(sorted(models, key=rank), start=1):  # stable: ties keep first-seen order
        counts = _counts(models[model])
        pass_pct = 100 * (counts["EXCELLENT"] + counts["PASS"]) // len(models[model])
        lines.append(
            f"| {place} | {model} | {_mean(scores[model]):.3f} | {pass_pct}% | {len(scores[model])} | "
            f"{_status_cells(counts)} |\n"
        )
    return "".join(lines)


def _by_model(trials: list[Trial]) -> str:
    lines = [
        "\n## By Model\n\n",
        "| Model | Trials | 👍 | ✅ | ❌ | ⏱️ | ⚠️ | Input Tokens | Output Tokens | Avg dur (s) |\n",
        "|-------|--------|----|----|----|----|----|--------------|---------------|-------------|\n",
    ]
    for model, group in sorted(_by(trials, "model").items()):
        tokens_in = sum(t["input_tokens"] for t in group)
        tokens_out = sum(t["output_tokens"] for t in group)
        duration = sum(float(t["duration"]) for t in group) / len(group)
        lines.append(
            f"| {model} | {len(group)} | {_status_cells(_counts(group))} | {tokens_in} | {tokens_out} | "
            f"{duration:.1f} |\n"
        )
    return "".join(lines)


def _by_case(trials: list[Trial]) -> str:
    lines = [
        "\n## By Test Case\n\n",
        "| Test Case | Trials | 👍 | ✅ | ❌ | ⏱️ | ⚠️ |\n",
        "|-----------|--------|----|----|----|----|----|\n",
    ]
    for case, group in sorted(_by(trials, "test_case").items()):
        lines.append(f"| {case} | {len(group)} | {_status_cells(_counts(group))} |\n")
    return "".join(lines)


def _grid(trials: list[Trial]) -> str:
    cases = sorted({t["test_case"] for t in trials})
    cells = _by(trials, "model")
    header = ["Model", *cases]
    lines = [
        "\n## Grid\n\n",
        "| " + " | ".join(header) + " |\n",
        "|" + "|".join("-" * max(3, len(col)) for col in header) + "|\n",
    ]
    for model in sorted(cells):
        row = [model]
        for case in cases:
            mine = sorted((t for t in cells[model] if t["test_case"] == case), key=lambda t: t["trial_index"])
            row.append(" ".join(STATUS_ICONS.get(t["status"], "") for t in mine) if mine else _DASH)
        lines.append("| " + " | ".join(row) + " |\n")
    return "".join(lines)


def _stability(trials: list[Trial]) -> str:
    cells: dict[tuple[str, str], list[Trial]] = defaultdict(list)
    for trial in trials:
        cells[(trial["model"], trial["test_case"])].append(trial)
    if all(len(group) == 1 for group in cells.values()):
        return ""
    lines = [
        "\n## Stability\n\n",
        "Per-(model, test case) pass rate across trials. ",
        "🟢 stable = all trials passed; 🟡 flaky = mixed; 🔴 broken = none passed.\n\n",
        "| Model | Test Case | Pass Rate | Stability |\n",
        "|-------|-----------|-----------|-----------|\n",
    ]
    for (model, case), group in sorted(cells.items()):
        passing, total = sum(t["status"] in PASSING for t in group), len(group)
        verdict = "🟢 STABLE" if passing == total else "🔴 BROKEN" if passing == 0 else "🟡 FLAKY"
        lines.append(f"| {model} | {case} | {passing}/{total} ({passing / total * 100:.0f}%) | {verdict} |\n")
    return "".join(lines)


def failing_section(trials: Iterable[Trial]) -> str:
    """zrb's Failing / Timeout Trials section, byte for byte, for trials in zrb's shape
    (``model``, ``test_case``, ``trial_index``, ``status``, ``duration``)."""
    return _failing(sorted(trials, key=_trial_order))


def _failing(trials: list[Trial]) -> str:
    failing = [t for t in trials if t["status"] in _FAILING]
    if not failing:
        return "\n## Failing / Timeout Trials\n\nNo failing or timeout trials.\n"
    lines = [
        "\n## Failing / Timeout Trials\n\n",
        "| Model | Test Case | Trial | Status | Duration (s) |\n",
        "|-------|-----------|-------|--------|--------------|\n",
    ]
    lines += [
        f"| {t['model']} | {t['test_case']} | {t['trial_index']} | {_icon_status(t['status'])} | "
        f"{float(t['duration']):.1f} |\n"
        for t in failing
    ]
    return "".join(lines)


def _best(trials: list[Trial]) -> dict[str, dict[str, Any]]:
    """Per case, the best value of each bold column among PASS and EXCELLENT trials."""
    best: dict[str, dict[str, Any]] = {}
    for case, group in _by([t for t in trials if t["status"] in PASSING], "test_case").items():
        scores = [s for t in group if (s := _score(t)) is not None]
        best[case] = {
            "duration": min(float(t["duration"]) for t in group),
            "score": max(scores) if scores else None,
            "total_tokens": min(t["total_tokens"] for t in group),
            "tool_call_count": min(t["tool_call_count"] for t in group),
        }
    return best


def _summary(trials: list[Trial]) -> str:
    best = _best(trials)
    lines = [
        "\n## Summary\n\n",
        "| Model | Test Case | Trial | Status | Duration (s) | Score | Total Tokens | Input | Output | "
        "Cache | Tool Calls |\n",
        "|-------|-----------|-------|--------|-------------|-------|--------------|-------|--------|"
        "-------|------------|\n",
    ]
    for trial in trials:
        top = best.get(trial["test_case"], {}) if trial["status"] in PASSING else {}
        duration, score = float(trial["duration"]), _score(trial)
        total, tools = trial["total_tokens"], trial["tool_call_count"]
        score_text = "" if score is None else _bold(f"{score:.2f}", score == top.get("score"))
        duration_text = _bold(f"{duration:.2f}", duration == top.get("duration"))
        lines.append(
            f"| {trial['model']} | {trial['test_case']} | {trial['trial_index']} | "
            f"{_icon_status(trial['status'])} | {duration_text} | "
            f"{score_text} | {_bold(str(total), total == top.get('total_tokens'))} | "
            f"{trial['input_tokens']} | {trial['output_tokens']} | {trial['cache_read_tokens']} | "
            f"{_bold(str(tools), tools == top.get('tool_call_count'))} |\n"
        )
    return "".join(lines)


def _bold(text: str, condition: bool) -> str:
    return f"**{text}**" if condition else text


def _details(trials: list[Trial]) -> str:
    blocks = [line for trial in trials for line in trial_details(trial, text=str)]  # zrb writes labels as is
    return "\n## Per-Trial Details\n\n" + "".join(blocks)
