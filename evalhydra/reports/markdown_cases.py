"""``report.md``'s per-case sections, in zrb-llm-evaluator's shape: Overall Status, By Model,
By Test Case, Grid, Stability, Failing / Timeout Trials, Summary (best per case in bold) and
Per-Trial Details. zrb's *model* is a ``service/model`` target here and its *test case* an
``eval/case``."""

from __future__ import annotations

import html
from typing import Any

from evalhydra.analysis import aggregate as agg
from evalhydra.analysis.data import ReportData
from evalhydra.core.text import visible
from evalhydra.core.values import STATUSES
from evalhydra.reports.mdcells import DASH, case_name, escape_cell, md_table, more_note, target_name
from evalhydra.reports.zrb import STATUS_ICONS, status_label, summary_row, trial_details
from evalhydra.reports.zrb_markdown import failing_section

__all__ = ["STATUS_LEGEND", "by_case_section", "by_model_section", "details_section",
           "failing_trials_section", "grid_section", "overall_section", "stability_section",
           "summary_section"]


def _counts(statuses: Any) -> list[str]:
    return [str(statuses[s]) for s in STATUSES]


_ICON_HEADERS = [STATUS_ICONS[s] for s in STATUSES]


#: What the status icons of the By Model, By Test Case and Grid tables mean.
STATUS_LEGEND = "Legend: " + " · ".join(f"{STATUS_ICONS[s]} {s}" for s in STATUSES)


def overall_section(data: ReportData) -> str:
    total = data.cases.total
    statuses = data.cases.overall().statuses
    rows = [[status_label(s), str(n), f"{n / total * 100:.1f}"]
            for s in (*STATUSES, *sorted(set(statuses) - set(STATUSES))) if (n := statuses[s])]
    return (f"**Total trials**: {total:,}\n\n## Overall Status\n\n"
            + md_table(rows, ["Status", "Count", "%"]))


def by_model_section(data: ReportData) -> str:
    rows = [[escape_cell(target_name(s, m)), str(t.n), *_counts(t.statuses), f"{t.duration / t.n:.1f}"]
            for (s, m), t in data.cases.by_label().items()]
    return "## By Model\n\n" + md_table(rows, ["Model", "Trials", *_ICON_HEADERS, "Avg dur (s)"])


def by_case_section(data: ReportData) -> str:
    rows = [[escape_cell(case_name(e, c)), str(t.n), *_counts(t.statuses)]
            for (e, c), t in data.cases.by_case]
    return ("## By Test Case\n\n" + md_table(rows, ["Test Case", "Trials", *_ICON_HEADERS])
            + more_note(len(rows), data.cases.cases_total, "test cases"))


def grid_section(data: ReportData) -> str:
    labels = list(data.cases.by_label())
    rows = []
    for s, m in labels:
        cells = []
        for e, c in data.grid_cases:
            statuses = data.grid.get((s, m, e, c))
            cells.append(" ".join(STATUS_ICONS.get(x, "?") for x in statuses) if statuses else DASH)
        rows.append([escape_cell(target_name(s, m)), *cells])
    headers = ["Model", *(escape_cell(case_name(e, c), 60) for e, c in data.grid_cases)]
    return ("## Grid\n\n" + md_table(rows, headers)
            + more_note(len(data.grid_cases), data.cases.cases_total, "test cases (columns)")
            + "\n" + STATUS_LEGEND + "\n")


def stability_section(data: ReportData) -> str:
    if data.cases.max_trials <= 1:
        return ""
    rows = []
    for s, m, e, c, p, n in data.cases.stability:
        verdict = "🟢 STABLE" if p == n else "🔴 BROKEN" if p == 0 else "🟡 FLAKY"
        rows.append([escape_cell(target_name(s, m)), escape_cell(case_name(e, c)),
                     f"{p}/{n} ({p / n * 100:.0f}%)", verdict])
    note = ("Per-(model, test case) pass rate across trials. 🟢 stable = all trials passed;"
            " 🟡 flaky = mixed; 🔴 broken = none passed.")
    return (f"## Stability\n\n{note}\n\n" + md_table(rows, ["Model", "Test Case", "Pass Rate", "Stability"])
            + more_note(len(rows), data.cases.stability_total, "(model, test case) cells"))


def failing_trials_section(data: ReportData) -> str:
    """zrb-llm-evaluator's Failing / Timeout Trials table (its bytes for names without a ``|``),
    then why each failed."""
    def label(text: str) -> str:  # zrb's bytes, but a "|" cannot break the table
        return visible(html.escape(text, quote=False), lines=False).replace("|", r"\|")

    agent = [r["kind"] == "agent" for r in data.failing]  # zrb names an agent trial by model and case
    trials = [{"model": label(r["model"] if is_agent else target_name(r["service_name"], r["model"])),
               "test_case": label(r["case_id"] if is_agent else case_name(r["eval_id"], r["case_id"])),
               "trial_index": r["run_index"], "status": r["status"], "duration": r["duration"]}
              for r, is_agent in zip(data.failing, agent, strict=True)]
    section = failing_section(trials).lstrip("\n").rstrip("\n")
    if not data.failing:
        return section
    rows = [[escape_cell(target_name(r["service_name"], r["model"])),
             escape_cell(case_name(r["eval_id"], r["case_id"])), str(r["run_index"]),
             escape_cell(r["error_kind"] or r["failure_reason"], 80), escape_cell(r["output"], 80)]
            for r in data.failing[:agg.CAP_TRIALS]]
    reasons = md_table(rows, ["Model", "Test Case", "Trial", "Reason", "Output"])
    return (section + more_note(len(data.failing), data.failing_total, "failing trials")
            + "\n\n### Why they failed\n\n" + reasons
            + more_note(len(rows), data.failing_total, "failing trials"))


def _checks(details: Any) -> list[dict[str, Any]]:
    """Validator checks stored in ``details`` (a verification result or a list of checks)."""
    if isinstance(details, dict):
        details = details.get("details")
    if not isinstance(details, list):
        return []
    return [{"name": str(c.get("name", "")), "passed": bool(c.get("passed")),
             "message": str(c.get("message") or "")} for c in details if isinstance(c, dict)]


def _verdict_of(r: dict[str, Any]) -> dict[str, Any] | None:
    """An agent trial's stored verification result; a chat result's score as one."""
    if r["kind"] == "agent":
        details = r["details"] if isinstance(r["details"], dict) else {}
        found = details.get("verification_result")
        if not isinstance(found, dict) or found.get("score") is None:
            return None
        return {**found, "score": float(r["score"]), "details": _checks(found)}
    if r["score"] is None:
        return None
    return {"status": r["status"], "score": float(r["score"]), "details": []}


def _zrb_row(r: dict[str, Any]) -> dict[str, Any]:
    """A trial row in zrb's TrialResult shape (labels HTML-escaped; zrb escapes pipes).

    The score is the stored ``score`` (for agents, the validator's), so the bold
    best values computed in SQL compare equal.
    """
    verdict = _verdict_of(r)
    return {
        "model": html.escape(target_name(r["service_name"], r["model"]), quote=False),
        "test_case": html.escape(case_name(r["eval_id"], r["case_id"]), quote=False),
        "trial_index": r["run_index"], "status": r["status"], "duration": r["duration"],
        "exit_code": r["exit_code"], "log_path": r["log_path"] or "",
        "stdout_log_path": r["stdout_log_path"] or "", "verification_result": verdict,
        "total_tokens": r["input_tokens"] + r["output_tokens"], "input_tokens": r["input_tokens"],
        "output_tokens": r["output_tokens"], "cache_read_tokens": r["cache_read_tokens"],
        "tool_calls": [html.escape(n, quote=False) for n in r["tool_names"]],
        "tool_call_count": len(r["tool_names"]),
    }


_SUMMARY_HEADER = (
    "| Model | Test Case | Trial | Status | Duration (s) | Score | "
    "Total Tokens | Input | Output | Cache | Tool Calls |\n"
    "|-------|-----------|-------|--------|-------------|-------|"
    "--------------|-------|--------|-------|------------|\n"
)


def summary_section(data: ReportData) -> str:
    lines = [summary_row(_zrb_row(r), data.bests.get((r["eval_id"], r["case_id"])))
             for r in data.trials]
    note = "Best per test case among passing trials in **bold**."
    return (f"## Summary\n\n{note}\n\n{_SUMMARY_HEADER}{''.join(lines).rstrip()}"
            + more_note(len(lines), data.trials_total, "trials"))


def _chat_details(r: dict[str, Any]) -> list[str]:
    head = (f"### {escape_cell(target_name(r['service_name'], r['model']))} /"
            f" {escape_cell(case_name(r['eval_id'], r['case_id']))} / Trial {r['run_index']}\n\n")
    lines = [head, f"- **Status**: {status_label(r['status'])}\n",
             f"- **Latency**: {r['duration']:.2f}s (attempts {r['attempts'] or 1})\n",
             *([f"- **Reply named model**: {escape_cell(r['reply_model'])}\n"]
               if r.get("reply_model") and r["reply_model"] != r["model"] else []),
             f"- **Score**: {float(r['score'] or 0.0):.2f}\n",
             f"- **Tokens**: input={r['input_tokens']}, output={r['output_tokens']},"
             f" cache={r['cache_read_tokens']}\n"]
    if r["tool_names"]:
        lines.append(f"- **Tool calls** ({len(r['tool_names'])}): "
                     f"{escape_cell(', '.join(r['tool_names']), 300)}\n")
    for label, key in (("Input", "input"), ("Expected", "ideal"), ("Output", "output"),
                       ("Reason", "failure_reason"), ("Error", "error_kind"), ("Feedback", "feedback"),
                       ("Suggested fix", "suggested_fix")):
        if r[key] not in (None, ""):
            lines.append(f"- **{label}**: {escape_cell(r[key], 500)}\n")
    return [*lines, "\n"]


def details_section(data: ReportData) -> str:
    lines: list[str] = []
    for r in data.trials:
        lines += trial_details(_zrb_row(r)) if r["kind"] == "agent" else _chat_details(r)
    return ("## Per-Trial Details\n\n" + "".join(lines).rstrip()
            + more_note(len(data.trials), data.trials_total, "trials"))
