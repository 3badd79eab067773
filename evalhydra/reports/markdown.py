"""``report.md`` and the short ``summary.md``: GitHub Markdown from a :class:`ReportData`.

Sections of report.md, in order: the run header; per eval × service × model
results (pass rates with case-clustered intervals, latency, retries, errors, tokens, cost); baseline
comparisons (the seed's interval plus the paired one); trials (pass@k, pass^k,
flakiest cases) when a case ran more than once; then zrb-llm-evaluator's
Overall Status, By Model, By Test Case, Grid, Stability, Failing / Timeout
Trials, Summary (best per case in bold) and Per-Trial Details. zrb's *model*
is a ``service/model`` target here and its *test case* an ``eval/case``.

Large runs are capped (trial rows, case rows, grid columns) with a note
saying how much was left out. Every value that can hold model output is
escaped, so ``|``, a newline or HTML cannot break a table. Nothing reads the
clock: the same store gives the same bytes.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from typing import Any

from tabulate import tabulate

from evalhydra.analysis import aggregate as agg
from evalhydra.analysis.compare import is_improvement, is_regression
from evalhydra.analysis.comparison import in_points
from evalhydra.analysis.data import ReportData
from evalhydra.core.text import visible
from evalhydra.core.values import STATUSES
from evalhydra.plan.selection import selection_in
from evalhydra.reports.zrb import STATUS_ICONS, status_label, summary_row, trial_details
from evalhydra.reports.zrb_markdown import failing_section
from evalhydra.stats.clustered import pass_rate_interval

__all__ = ["comparison_table", "escape_cell", "render_markdown", "render_summary_md", "verdict"]

DASH = "—"
Section = Callable[[ReportData], str]


def escape_cell(value: Any, limit: int = 120) -> str:
    """Make any value safe inside a Markdown table cell (or a one-line bullet)."""
    text = "" if value is None else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = visible(html.escape(text, quote=False).replace("\r", " "))
    return text.replace("|", r"\|").replace("\n", "<br>")


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str], numeric: Sequence[int] = ()) -> str:
    """A GitHub table; columns listed in ``numeric`` hold numbers and are right-aligned."""
    text_columns = [i for i in range(len(headers)) if i not in numeric]
    return tabulate(rows, headers=list(headers), tablefmt="github",
                    disable_numparse=text_columns if numeric else True)


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _target(service: str, model: str) -> str:
    return f"{service}/{model}" if model else service


def _case(eval_id: str, case_id: str) -> str:
    return f"{eval_id}/{case_id}"


def _more(shown: int, total: int, what: str) -> str:
    if total <= shown:
        return ""
    return (f"\n\n_Showing the first {shown:,} of {total:,} {what}; query the store for the rest"
            " (`evalhydra results`, `evalhydra query`)._")


# --- header and results -------------------------------------------------------


def _generated(runs: Sequence[dict[str, Any]]) -> str:
    stamps = [r.get("finished_at") or r.get("started_at") or "" for r in runs]
    return max(stamps) if any(stamps) else DASH


def _json_or_none(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _header(data: ReportData) -> str:
    lines = ["# evalhydra report", ""]
    for run in data.runs:
        lines.append(
            f"- **Run** `{escape_cell(run['run_id'])}`: {escape_cell(run.get('status'))}, started"
            f" {escape_cell(run.get('started_at'))}, finished {escape_cell(run.get('finished_at') or DASH)},"
            f" config `{escape_cell(run.get('fingerprint'))}`")
        selected = selection_in(_json_or_none(run.get("config")))
        if selected:
            lines.append(f"- **Selection** of `{escape_cell(run['run_id'])}`: {escape_cell(selected)}"
                         " (a subset of the cases: not the whole eval)")
    lines.append(f"- **Generated**: {_generated(data.runs)}")
    t = data.cases.overall()
    scored = t.n - t.errors
    rate = _pct(t.passed / scored) if scored else DASH
    hits = f"; {t.cached:,} from the response cache" if t.cached else ""
    lines.append(f"- **Results**: {t.n:,}, passed {t.passed:,}, failed {scored - t.passed:,},"
                 f" errors {t.errors:,}; pass rate {rate}; cost ${t.cost_usd:.4f}{hits}")
    return "\n".join(lines)


def _results_row(data: ReportData, t: agg.TargetAgg) -> list[Any]:
    stats = data.model_stats(t.key)
    lat = stats["latency"]
    scored = t.n - t.errors
    rate = pass_rate_interval(t.hist)
    return [escape_cell(t.key[1]), escape_cell(t.key[2]), escape_cell(t.key[3]), t.n, t.passed,
            scored - t.passed, t.errors, _pct(rate.estimate) if rate.n_cases else DASH,
            f"[{_pct(rate.low)}, {_pct(rate.high)}]" if rate.n_cases else DASH, rate.method or DASH,
            f"{lat['mean_ms']:.1f}", lat["p50_ms"], lat["p95_ms"],
            stats["retries"]["retried_runs"], stats["retries"]["total_attempts"],
            f"{t.score / t.n:.3f}" if t.n else DASH, t.input_tokens, t.output_tokens,
            *([t.reasoning_tokens] if _thinking(data) else []), *_first_token_cells(data, t),
            f"{t.cost_usd:.4f}"]


_FIRST_TOKEN_HEADERS = ["TTFT p50 ms", "TTFT p95 ms", "Answer p50 ms", "Answer p95 ms"]


def _thinking(data: ReportData) -> bool:
    """Whether any target spent reasoning tokens (the column is left out otherwise)."""
    return any(t.reasoning_tokens for t in data.cases.targets.values())


def _first_token_cells(data: ReportData, t: agg.TargetAgg) -> list[Any]:
    """TTFT and first-answer p50/p95 of a target's streamed answers (no columns without any)."""
    if not data.first_token:
        return []
    first = data.first_token.get(t.key)
    if first is None:
        return [DASH] * 4
    answer = [DASH, DASH] if first.answer_p50_ms is None else [f"{first.answer_p50_ms:.0f}",
                                                               f"{first.answer_p95_ms:.0f}"]
    return [f"{first.p50_ms:.0f}", f"{first.p95_ms:.0f}", *answer]


def _results(data: ReportData) -> str:
    targets = data.targets()
    if not targets:
        return "## Results\n\nNo eval results."
    headers = ["Eval", "Service", "Model", "N", "Passed", "Failed", "Errors", "Pass rate",
               "95% CI", "CI method", "Mean ms", "p50 ms", "p95 ms", "Retried", "Attempts",
               "Avg score", "Tokens in", "Tokens out",
               *(["Thinking tokens"] if _thinking(data) else []),
               *(_FIRST_TOKEN_HEADERS if data.first_token else []),
               "Cost USD"]
    note = ("Pass rate = the mean over cases of each case's pass fraction over its scored trials"
            " (with one trial per case: passed / (N − errors)); infrastructure errors (HTTP"
            " failures, timeouts, agent ERROR/TIMEOUT) are counted apart and never lower it. The"
            " 95% CI is Wilson's, on the effective sample size when trials repeat cases (clustered"
            " by case). `evals.json` keeps zig_eval's passed / N and Wilson interval over results.")
    extra = range(18, len(headers) - 1)  # thinking tokens, first-token times
    table = _table([_results_row(data, t) for t in targets], headers,
                   numeric=(3, 4, 5, 6, 11, 12, 13, 14, 16, 17, *extra))
    return f"## Results\n\n{note}\n\n{table}"


def _graders(data: ReportData) -> str:
    """Each OpenAI Evals criterion's pass rate and mean score per target (none: no section)."""
    if not data.graders:
        return ""
    rows = [[g["eval"], _target(g["service"], g["model"]), g["grader"], g["n"], g["passed"],
             _pct(g["pass_rate"]), DASH if g["mean_score"] is None else f"{g['mean_score']:.4g}"]
            for g in data.graders]
    note = ("Each testing criterion of an OpenAI Evals suite (openai_graders), by its name: the results"
            " it graded, how many passed it, and its mean score (on the grader's own scale). A result"
            " passes when every criterion passes.")
    headers = ["Eval", "Target", "Grader", "Results", "Passed", "Pass rate", "Mean score"]
    return "## Graders\n\n" + note + "\n\n" + _table(rows, headers, numeric=(3, 4, 5, 6))


def _judge_cell(value: float | None, ci: Any = None) -> str:
    if value is None:
        return DASH
    return f"{value:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{value:.2f}"


def _judges(data: ReportData) -> str:
    """Each judge against people's labels, and the pass rates it gave corrected (none: no section)."""
    if not data.judges:
        return ""
    rows = []
    for doc in data.judges:
        a = doc["agreement"]
        consistency = (DASH if doc["self_consistency"] is None
                       else f"{doc['self_consistency']:.2f} ({doc['repeated_outputs']} outputs)")
        settings = f" (matcher {doc['judge_settings']})" if doc["judge_settings"] else ""
        rows.append([doc["eval"], f"{doc['judge_service']}/{doc['judge_model']}{settings}", a["n"],
                     _judge_cell(a["sensitivity"], a["sensitivity_ci"] if a["n"] else None),
                     _judge_cell(a["specificity"], a["specificity_ci"] if a["n"] else None),
                     _judge_cell(a["kappa"], a["kappa_ci"]), _judge_cell(a["alpha"], a["alpha_ci"]),
                     consistency])
    note = ("Each judge (an eval's judge service and model) against people's labels (`evalhydra label`):"
            " sensitivity and specificity with Wilson intervals, Cohen's κ, Krippendorff's α, and how often"
            " it repeats a verdict when rejudged. Pass rates are corrected for its errors by Rogan and"
            " Gladen's estimator; the 95% interval carries the cases' and the labels' variance.")
    return ("## Judges\n\n" + note + "\n\n"
            + _table([[escape_cell(c) for c in r] for r in rows],
                     ["Eval", "Judge", "Labels", "Sensitivity", "Specificity", "κ", "α", "Self-consistency"],
                     numeric=(2,))
            + "\n\n" + _corrected_table(data.judges))


def _corrected_table(judges: list[dict[str, Any]], limit: int | None = None) -> str:
    """The pass rates each judge gave, raw and corrected for its errors (at most ``limit`` rows)."""
    rows = []
    for doc in judges:
        for t in doc["targets"]:
            fixed = (f"{_pct(t['corrected_pass_rate'])} [{_pct(t['corrected_ci_low'])},"
                     f" {_pct(t['corrected_ci_high'])}]" if t["corrected_pass_rate"] is not None
                     else t["problem"] or DASH)
            rows.append([doc["eval"], _target(t["service"], t["model"]), t["cases"],
                         _pct(t["raw_pass_rate"]), fixed])
    return _table([[escape_cell(c) for c in r] for r in rows[:limit]],
                  ["Eval", "Target", "Cases", "Judged pass rate", "Corrected [95% CI]"], numeric=(2, 3))


# --- comparisons ----------------------------------------------------------------


def verdict(paired: dict[str, Any] | None) -> str:
    """``🔻 worse`` / ``🔺 better`` when the paired test (Holm-adjusted) rejects "no change"."""
    if not paired:
        return "unpaired"
    if is_regression(paired):
        return "🔻 worse"
    if is_improvement(paired):
        return "🔺 better"
    if str(paired.get("verdict", "")).startswith("cannot reach"):
        return str(paired["verdict"])
    return "no significant change"


def _p(value: float | None) -> str:
    return DASH if value is None else f"{value:.3g}"


def comparison_table(rows: Sequence[dict[str, Any]], tablefmt: str = "github") -> str:
    """The comparison rows as a table (shared by report.md and ``compare``): pass rates in
    percent, every difference and interval in percentage points (:func:`in_points`).

    Args:
        rows: Comparison rows (:func:`evalhydra.analysis.compare.comparison_row`).
        tablefmt: ``github`` (cells escaped for Markdown) or any tabulate format.
    """
    cell = escape_cell if tablefmt == "github" else (lambda v: "" if v is None else str(v))
    table = []
    for c in rows:
        p, n = c.get("paired"), in_points(c)
        table.append([
            cell(c["eval_id"]), c["target_kind"], cell(c["baseline_name"]),
            cell(c["candidate_name"]), f"{n['baseline_pct']:.1f}%", f"{n['candidate_pct']:.1f}%",
            f"{n['delta_pp']:+.1f}", _points_interval(n["delta_ci_pp"]),
            str(p["n_cases"]) if p else DASH,
            f"{n['paired_delta_pp']:+.1f} {_points_interval(n['paired_ci_pp'])}" if p else DASH,
            _p(p["p_value"]) if p else DASH, _p(p["p_holm"]) if p else DASH,
            f"{len(p['regressed'])}/{len(p['improved'])}" if p else DASH, verdict(p)])
    headers = ["Eval", "Kind", "Baseline", "Candidate", "Base", "Cand", "Δ (pp)", "Δ CI, unpaired (pp)",
               "Cases", "Paired Δ [95% CI] (pp)", "p", "p (Holm)", "Regr./impr. cases", "Verdict"]
    return tabulate(table, headers=headers, tablefmt=tablefmt, disable_numparse=True)


def _points_interval(bounds: Sequence[float]) -> str:
    return f"[{bounds[0]:+.1f}, {bounds[1]:+.1f}]"


def _case_list(cases: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(f"`{escape_cell(c, 80)}`" for c in cases[:limit])
    return shown + (f", … {len(cases) - limit} more" if len(cases) > limit else "")


def _changed_cases(rows: Sequence[dict[str, Any]]) -> str:
    lines = []
    for c in rows:
        p = c.get("paired")
        if not p or not (p["regressed"] or p["improved"] or p["judge_flips"]):
            continue
        where = (f"{escape_cell(c['eval_id'])}: {escape_cell(c['baseline_name'])} →"
                 f" {escape_cell(c['candidate_name'])}")
        if p["regressed"]:
            lines.append(f"- {where}, **regressed**: {_case_list(p['regressed'])}")
        if p["improved"]:
            lines.append(f"- {where}, improved: {_case_list(p['improved'])}")
        if p["judge_flips"]:
            lines.append(f"- {where}, verdict flipped on the same output (the judge, not the"
                         f" model; case#trial): {_case_list(p['judge_flips'])}")
    return "\n".join(lines)


def _comparisons(data: ReportData) -> str:
    if not data.comparisons:
        return ""
    note = ("Rates are in percent, every Δ and interval in percentage points (pp)."
            " Paired Δ: mean over shared cases of (candidate − baseline) pass fraction, with a"
            " case-clustered paired t-interval (with one trial per case: Newcombe's paired interval);"
            " p is the exact one-sided sign-flip test's on the per-case differences; p (Holm) adjusts"
            " for every comparison in this report, and the verdict uses it. Δ CI (unpaired) is"
            " zig_eval's `[cand.low − base.high, cand.high − base.low]`.")
    changed = _changed_cases(data.comparisons)
    return ("## Baseline comparisons\n\n" + note + "\n\n" + comparison_table(data.comparisons)
            + ("\n\n" + changed if changed else ""))


# --- trials as a statistic --------------------------------------------------------


def _pass_k(data: ReportData) -> str:
    width = min(agg.MAX_K, data.cases.max_trials)
    table = []
    for t in data.targets():
        ks, at, hat = agg.pass_k_table(t)
        cells = [f"{at[k]:.3f}" if k in at else DASH for k in range(1, width + 1)]
        cells += [f"{hat[k]:.3f}" if k in hat else DASH for k in range(1, width + 1)]
        v = t.verdicts
        table.append([escape_cell(t.key[1]), escape_cell(_target(*t.key[2:])), str(t.cases),
                      f"{t.n / t.cases:.1f}" if t.cases else DASH, *cells,
                      str(v["STABLE"]), str(v["FLAKY"]), str(v["BROKEN"])])
    headers = ["Eval", "Target", "Cases", "Trials/case",
               *(f"pass@{k}" for k in range(1, width + 1)),
               *(f"pass^{k}" for k in range(1, width + 1)), "🟢 Stable", "🟡 Flaky", "🔴 Broken"]
    return _table(table, headers)


def _flaky(data: ReportData) -> str:
    if not data.cases.flaky:
        return "No flaky cases."
    rows = [[escape_cell(_target(s, m)), escape_cell(_case(e, c)), f"{p}/{n}", f"{f:.2f}"]
            for f, s, m, e, c, p, n in data.cases.flaky]
    total = sum(t.verdicts["FLAKY"] for t in data.cases.targets.values())
    return (_table(rows, ["Target", "Case", "Passed", "Flakiness"])
            + _more(len(rows), total, "flaky cases"))


def _trials(data: ReportData) -> str:
    if data.cases.max_trials <= 1:
        return ""
    note = ("pass@k: chance that at least one of k trials passes; pass^k: that all k pass"
            " (unbiased estimators over each case's trials, averaged over cases). Flakiness ="
            " 2·min(passed, failed)/trials. Trials with an infrastructure error are left out.")
    return (f"## Trials\n\n{note}\n\n{_pass_k(data)}\n\n### Flakiest cases\n\n{_flaky(data)}")


# --- zrb sections -----------------------------------------------------------------


def _counts(statuses: Any) -> list[str]:
    return [str(statuses[s]) for s in STATUSES]


_ICON_HEADERS = [STATUS_ICONS[s] for s in STATUSES]
#: What the status icons of the By Model, By Test Case and Grid tables mean.
STATUS_LEGEND = "Legend: " + " · ".join(f"{STATUS_ICONS[s]} {s}" for s in STATUSES)


def _overall(data: ReportData) -> str:
    total = data.cases.total
    statuses = data.cases.overall().statuses
    rows = [[status_label(s), str(n), f"{n / total * 100:.1f}"]
            for s in (*STATUSES, *sorted(set(statuses) - set(STATUSES))) if (n := statuses[s])]
    return (f"**Total trials**: {total:,}\n\n## Overall Status\n\n"
            + _table(rows, ["Status", "Count", "%"]))


def _by_model(data: ReportData) -> str:
    rows = [[escape_cell(_target(s, m)), str(t.n), *_counts(t.statuses), f"{t.duration / t.n:.1f}"]
            for (s, m), t in data.cases.by_label().items()]
    return "## By Model\n\n" + _table(rows, ["Model", "Trials", *_ICON_HEADERS, "Avg dur (s)"])


def _by_case(data: ReportData) -> str:
    rows = [[escape_cell(_case(e, c)), str(t.n), *_counts(t.statuses)] for (e, c), t in data.cases.by_case]
    return ("## By Test Case\n\n" + _table(rows, ["Test Case", "Trials", *_ICON_HEADERS])
            + _more(len(rows), data.cases.cases_total, "test cases"))


def _grid(data: ReportData) -> str:
    labels = list(data.cases.by_label())
    rows = []
    for s, m in labels:
        cells = []
        for e, c in data.grid_cases:
            statuses = data.grid.get((s, m, e, c))
            cells.append(" ".join(STATUS_ICONS.get(x, "?") for x in statuses) if statuses else DASH)
        rows.append([escape_cell(_target(s, m)), *cells])
    headers = ["Model", *(escape_cell(_case(e, c), 60) for e, c in data.grid_cases)]
    return ("## Grid\n\n" + _table(rows, headers)
            + _more(len(data.grid_cases), data.cases.cases_total, "test cases (columns)")
            + "\n" + STATUS_LEGEND + "\n")


def _stability(data: ReportData) -> str:
    if data.cases.max_trials <= 1:
        return ""
    rows = []
    for s, m, e, c, p, n in data.cases.stability:
        verdict = "🟢 STABLE" if p == n else "🔴 BROKEN" if p == 0 else "🟡 FLAKY"
        rows.append([escape_cell(_target(s, m)), escape_cell(_case(e, c)),
                     f"{p}/{n} ({p / n * 100:.0f}%)", verdict])
    note = ("Per-(model, test case) pass rate across trials. 🟢 stable = all trials passed;"
            " 🟡 flaky = mixed; 🔴 broken = none passed.")
    return (f"## Stability\n\n{note}\n\n" + _table(rows, ["Model", "Test Case", "Pass Rate", "Stability"])
            + _more(len(rows), data.cases.stability_total, "(model, test case) cells"))


def _failing(data: ReportData) -> str:
    """zrb-llm-evaluator's Failing / Timeout Trials table (its bytes for names without a ``|``),
    then why each failed."""
    def label(text: str) -> str:  # zrb's bytes, but a "|" cannot break the table
        return visible(html.escape(text, quote=False), lines=False).replace("|", r"\|")

    agent = [r["kind"] == "agent" for r in data.failing]  # zrb names an agent trial by model and case
    trials = [{"model": label(r["model"] if is_agent else _target(r["service_name"], r["model"])),
               "test_case": label(r["case_id"] if is_agent else _case(r["eval_id"], r["case_id"])),
               "trial_index": r["run_index"], "status": r["status"], "duration": r["duration"]}
              for r, is_agent in zip(data.failing, agent, strict=True)]
    section = failing_section(trials).lstrip("\n").rstrip("\n")
    if not data.failing:
        return section
    rows = [[escape_cell(_target(r["service_name"], r["model"])),
             escape_cell(_case(r["eval_id"], r["case_id"])), str(r["run_index"]),
             escape_cell(r["error_kind"] or r["failure_reason"], 80), escape_cell(r["output"], 80)]
            for r in data.failing[:agg.CAP_TRIALS]]
    reasons = _table(rows, ["Model", "Test Case", "Trial", "Reason", "Output"])
    return (section + _more(len(data.failing), data.failing_total, "failing trials")
            + "\n\n### Why they failed\n\n" + reasons
            + _more(len(rows), data.failing_total, "failing trials"))


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
        "model": html.escape(_target(r["service_name"], r["model"]), quote=False),
        "test_case": html.escape(_case(r["eval_id"], r["case_id"]), quote=False),
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


def _summary(data: ReportData) -> str:
    lines = [summary_row(_zrb_row(r), data.bests.get((r["eval_id"], r["case_id"])))
             for r in data.trials]
    note = "Best per test case among passing trials in **bold**."
    return (f"## Summary\n\n{note}\n\n{_SUMMARY_HEADER}{''.join(lines).rstrip()}"
            + _more(len(lines), data.trials_total, "trials"))


def _chat_details(r: dict[str, Any]) -> list[str]:
    head = (f"### {escape_cell(_target(r['service_name'], r['model']))} /"
            f" {escape_cell(_case(r['eval_id'], r['case_id']))} / Trial {r['run_index']}\n\n")
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


def _details(data: ReportData) -> str:
    lines: list[str] = []
    for r in data.trials:
        lines += trial_details(_zrb_row(r)) if r["kind"] == "agent" else _chat_details(r)
    return ("## Per-Trial Details\n\n" + "".join(lines).rstrip()
            + _more(len(data.trials), data.trials_total, "trials"))


SECTIONS: list[Section] = [
    _header, _results, _graders, _judges, _comparisons, _trials, _overall, _by_model, _by_case, _grid,
    _stability, _failing, _summary, _details,
]


def render_markdown(data: ReportData) -> str:
    """The whole report.md (a pure function of ``data``)."""
    if not data.cases.total:
        return visible(_header(data)) + "\n\nNo eval results.\n"
    return visible("\n\n".join(part for section in SECTIONS if (part := section(data)))) + "\n"


# --- summary.md -------------------------------------------------------------------

SUMMARY_ROWS = 50


def _scored_rate(t: agg.TargetAgg) -> float:
    return pass_rate_interval(t.hist).estimate


def render_summary_md(data: ReportData) -> str:
    """A short Markdown summary for ``$GITHUB_STEP_SUMMARY`` (≤ 50 table rows, worst first)."""
    c = data.cases
    overall = c.overall()
    ids = ", ".join(f"`{escape_cell(r['run_id'])}`" for r in data.runs[:5])
    scored = overall.n - overall.errors
    rate = _pct(overall.passed / scored) if scored else DASH
    lines = [f"### evalhydra {ids}: {rate} passed ({overall.passed:,}/{scored:,};"
             f" {overall.errors:,} errors)", ""]
    rows = []
    for t in sorted(data.targets(), key=_scored_rate)[:SUMMARY_ROWS]:
        interval = pass_rate_interval(t.hist)
        rows.append([escape_cell(t.key[1]), escape_cell(_target(*t.key[2:])), str(t.n),
                     _pct(interval.estimate) if interval.n_cases else DASH,
                     f"[{_pct(interval.low)}, {_pct(interval.high)}]" if interval.n_cases else DASH,
                     str(t.errors), f"{t.cost_usd:.4f}"])
    if rows:
        lines.append(_table(rows, ["Eval", "Target", "N", "Pass rate", "95% CI", "Errors", "Cost USD"]))
    if any(doc["targets"] for doc in data.judges):
        lines += ["", "**Judge-corrected pass rates** (Rogan-Gladen, from people's labels):", "",
                  _corrected_table(data.judges, SUMMARY_ROWS)]
    worse = [r for r in data.comparisons if verdict(r.get("paired")) == "🔻 worse"]
    if worse:
        lines += ["", "**Significant regressions** (case-paired test, Holm-adjusted):", "",
                  comparison_table(worse)]
    return visible("\n".join(lines).rstrip()) + "\n"
