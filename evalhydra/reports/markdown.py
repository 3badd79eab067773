"""``report.md``: GitHub-flavoured Markdown built with tabulate from store rows.

Every cell that can hold model output is escaped (``|``, newlines, HTML), so an
answer cannot break a table.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

__all__ = ["escape_cell", "render_markdown"]


def escape_cell(value: Any, limit: int = 120) -> str:
    """Make any value safe inside a Markdown table cell."""
    text = "" if value is None else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = html.escape(text, quote=False)
    return text.replace("|", r"\|").replace("\r", " ").replace("\n", "<br>")


def render_markdown(runs: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]],
                    comparisons: Sequence[dict[str, Any]] = ()) -> str:
    """The whole report as Markdown (a pure function of its inputs)."""
    parts = [_header(runs, rows), _stats_section(rows), _failures_section(rows)]
    if comparisons:
        parts.append(_comparison_section(comparisons))
    return "\n\n".join(p for p in parts if p) + "\n"


def _header(runs: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]) -> str:
    lines = ["# evalhydra report", ""]
    for run in runs:
        lines.append(f"- **Run** `{run['run_id']}`: {run.get('status')}, started {run.get('started_at')}, "
                     f"finished {run.get('finished_at') or '—'}, config `{run.get('fingerprint')}`")
    passed = sum(1 for r in rows if r.get("passed"))
    errors = sum(1 for r in rows if r.get("error_kind"))
    lines.append(f"- **Cells**: {len(rows)}, passed {passed}, failed {len(rows) - passed - errors}, "
                 f"errors {errors}")
    return "\n".join(lines)


def _stats_section(rows: Sequence[dict[str, Any]]) -> str:
    from evalhydra.reports.summary import group_stats

    stats = group_stats(rows)
    if not stats:
        return "No eval results."
    tokens = _token_totals(rows)
    table = [[escape_cell(s["eval"]), escape_cell(s["service"]), escape_cell(s["model"]), s["n"],
              s["passed"], f"{s['pass_rate']:.1%}", f"[{s['ci_low']:.1%}, {s['ci_high']:.1%}]",
              s["p50_ms"], s["p95_ms"], s["retried"], s["errors"],
              tokens.get((s["eval"], s["service"], s["model"]), 0), f"{s['cost_usd']:.4f}"]
             for s in stats]
    headers = ["Eval", "Service", "Model", "N", "Passed", "Pass rate", "95% CI (Wilson)", "p50 ms",
               "p95 ms", "Retried", "Errors", "Tokens", "Cost USD"]
    return "## Results\n\n" + tabulate(table, headers=headers, tablefmt="github")


def _token_totals(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = {}
    for r in rows:
        key = (r["eval_id"], r["service_name"], r["model"])
        out[key] = out.get(key, 0) + sum(int(r.get(k) or 0) for k in (
            "prompt_tokens", "completion_tokens", "judge_prompt_tokens", "judge_completion_tokens"))
    return out


def _failures_section(rows: Sequence[dict[str, Any]], limit: int = 50) -> str:
    failing = [r for r in rows if not r.get("passed")]
    if not failing:
        return "## Failures\n\nNo failing cells."
    table = [[escape_cell(r["eval_id"]), escape_cell(r["case_id"]), r["run_index"],
              escape_cell(r["service_name"]), escape_cell(r.get("error_kind") or "fail"),
              escape_cell(r.get("failure_reason")), escape_cell(r.get("output"), 80)]
             for r in failing[:limit]]
    more = f"\n\n… and {len(failing) - limit} more." if len(failing) > limit else ""
    return ("## Failures\n\n" + tabulate(table, headers=["Eval", "Case", "Trial", "Service", "Kind",
                                                         "Reason", "Output"], tablefmt="github") + more)


def _comparison_section(comparisons: Sequence[dict[str, Any]]) -> str:
    table = []
    for c in comparisons:
        paired = c.get("paired") or {}
        table.append([escape_cell(c["eval_id"]), c["target_kind"], escape_cell(c["baseline_name"]),
                      escape_cell(c["candidate_name"]), f"{c['baseline_pass_rate']:.1%}",
                      f"{c['candidate_pass_rate']:.1%}", f"{c['delta_pass_rate']:+.1%}",
                      f"[{c['delta_ci_low']:+.3f}, {c['delta_ci_high']:+.3f}]",
                      f"[{paired['ci_low']:+.3f}, {paired['ci_high']:+.3f}]" if paired else "—",
                      f"{paired['mcnemar_p']:.3g}" if paired else "—"])
    headers = ["Eval", "Kind", "Baseline", "Candidate", "Base", "Cand", "Δ", "Δ CI (seed)",
               "Paired Δ CI", "McNemar p"]
    return "## Baseline comparisons\n\n" + tabulate(table, headers=headers, tablefmt="github")
