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

import json
from collections.abc import Callable, Sequence
from typing import Any

from tabulate import tabulate

from evalhydra.analysis import aggregate as agg
from evalhydra.analysis.compare import is_improvement, is_regression
from evalhydra.analysis.comparison import in_points
from evalhydra.analysis.data import ReportData
from evalhydra.core.text import visible
from evalhydra.plan.selection import selection_in
from evalhydra.reports.markdown_cases import (
    by_case_section,
    by_model_section,
    details_section,
    failing_trials_section,
    grid_section,
    overall_section,
    stability_section,
    summary_section,
)
from evalhydra.reports.mdcells import DASH, case_name, escape_cell, md_table, more_note, pct, target_name
from evalhydra.stats.clustered import pass_rate_interval

__all__ = ["comparison_table", "render_markdown", "render_summary_md", "verdict"]

Section = Callable[[ReportData], str]


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
    rate = pct(t.passed / scored) if scored else DASH
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
            scored - t.passed, t.errors, pct(rate.estimate) if rate.n_cases else DASH,
            f"[{pct(rate.low)}, {pct(rate.high)}]" if rate.n_cases else DASH, rate.method or DASH,
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
    table = md_table([_results_row(data, t) for t in targets], headers,
                   numeric=(3, 4, 5, 6, 11, 12, 13, 14, 16, 17, *extra))
    return f"## Results\n\n{note}\n\n{table}"


def _graders(data: ReportData) -> str:
    """Each OpenAI Evals criterion's pass rate and mean score per target (none: no section)."""
    if not data.graders:
        return ""
    rows = [[g["eval"], target_name(g["service"], g["model"]), g["grader"], g["n"], g["passed"],
             pct(g["pass_rate"]), DASH if g["mean_score"] is None else f"{g['mean_score']:.4g}"]
            for g in data.graders]
    note = ("Each testing criterion of an OpenAI Evals suite (openai_graders), by its name: the results"
            " it graded, how many passed it, and its mean score (on the grader's own scale). A result"
            " passes when every criterion passes.")
    headers = ["Eval", "Target", "Grader", "Results", "Passed", "Pass rate", "Mean score"]
    return "## Graders\n\n" + note + "\n\n" + md_table(rows, headers, numeric=(3, 4, 5, 6))


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
            + md_table([[escape_cell(c) for c in r] for r in rows],
                     ["Eval", "Judge", "Labels", "Sensitivity", "Specificity", "κ", "α", "Self-consistency"],
                     numeric=(2,))
            + "\n\n" + _corrected_table(data.judges))


def _simulators(data: ReportData) -> str:
    """Each audited simulated user's targets: pass rate and pass^k, raw and corrected."""
    if not data.simulators:
        return ""
    rows, ks = [], []
    for r in data.simulators:
        target = target_name(r["service_name"], r["model"])
        rows.append([r["eval_id"], target, r["n"], r["audited_passes"] + r["audited_failures"],
                     r["broken_passes"] + r["broken_failures"], pct(r["raw_pass_rate"]),
                     _fixed(r["corrected_pass_rate"], r["corrected_ci_low"], r["corrected_ci_high"],
                            r["problem"])])
        ks += [[r["eval_id"], target, k, f"{v['raw']:.3f}", _fixed(v["corrected"], v["ci_low"], v["ci_high"],
                                                                  v["problem"], pct_of=False)]
               for k, v in r["pass_hat_k"].items()]
    note = ("People audited the simulated user's conversations (`evalhydra view`, audit): a broken one"
            " says nothing of the agent. Pass rates are the rate among unbroken conversations, pass^k"
            " is corrected by the moments of the observed pass^1..k; each 95% interval carries the"
            " cases' and the audit's variance (docs/uncertainty.md).")
    table = md_table([[escape_cell(c) for c in r] for r in rows],
                     ["Eval", "Target", "Conversations", "Audited", "Broken", "Pass rate",
                      "Corrected [95% CI]"], numeric=(2, 3, 4))
    if ks:
        table += "\n\n" + md_table([[escape_cell(c) for c in r] for r in ks],
                                    ["Eval", "Target", "k", "pass^k", "Corrected [95% CI]"], numeric=(2, 3))
    return "## Simulated users\n\n" + note + "\n\n" + table


def _fixed(value: float | None, low: float | None, high: float | None, problem: str | None,
           pct_of: bool = True) -> str:
    if value is None or low is None or high is None:
        return problem or DASH
    show = pct if pct_of else (lambda x: f"{x:.3f}")
    return f"{show(value)} [{show(low)}, {show(high)}]"


def _corrected_table(judges: list[dict[str, Any]], limit: int | None = None) -> str:
    """The pass rates each judge gave, raw and corrected for its errors (at most ``limit`` rows)."""
    rows = []
    for doc in judges:
        for t in doc["targets"]:
            fixed = (f"{pct(t['corrected_pass_rate'])} [{pct(t['corrected_ci_low'])},"
                     f" {pct(t['corrected_ci_high'])}]" if t["corrected_pass_rate"] is not None
                     else t["problem"] or DASH)
            rows.append([doc["eval"], target_name(t["service"], t["model"]), t["cases"],
                         pct(t["raw_pass_rate"]), fixed])
    return md_table([[escape_cell(c) for c in r] for r in rows[:limit]],
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
        table.append([escape_cell(t.key[1]), escape_cell(target_name(*t.key[2:])), str(t.cases),
                      f"{t.n / t.cases:.1f}" if t.cases else DASH, *cells,
                      str(v["STABLE"]), str(v["FLAKY"]), str(v["BROKEN"])])
    headers = ["Eval", "Target", "Cases", "Trials/case",
               *(f"pass@{k}" for k in range(1, width + 1)),
               *(f"pass^{k}" for k in range(1, width + 1)), "🟢 Stable", "🟡 Flaky", "🔴 Broken"]
    return md_table(table, headers)


def _flaky(data: ReportData) -> str:
    if not data.cases.flaky:
        return "No flaky cases."
    rows = [[escape_cell(target_name(s, m)), escape_cell(case_name(e, c)), f"{p}/{n}", f"{f:.2f}"]
            for f, s, m, e, c, p, n in data.cases.flaky]
    total = sum(t.verdicts["FLAKY"] for t in data.cases.targets.values())
    return (md_table(rows, ["Target", "Case", "Passed", "Flakiness"])
            + more_note(len(rows), total, "flaky cases"))


def _trials(data: ReportData) -> str:
    if data.cases.max_trials <= 1:
        return ""
    note = ("pass@k: chance that at least one of k trials passes; pass^k: that all k pass"
            " (unbiased estimators over each case's trials, averaged over cases). Flakiness ="
            " 2·min(passed, failed)/trials. Trials with an infrastructure error are left out.")
    return (f"## Trials\n\n{note}\n\n{_pass_k(data)}\n\n### Flakiest cases\n\n{_flaky(data)}")


# --- zrb sections -----------------------------------------------------------------


SECTIONS: list[Section] = [
    _header, _results, _graders, _judges, _simulators, _comparisons, _trials, overall_section,
    by_model_section, by_case_section, grid_section, stability_section, failing_trials_section,
    summary_section, details_section,
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
    rate = pct(overall.passed / scored) if scored else DASH
    lines = [f"### evalhydra {ids}: {rate} passed ({overall.passed:,}/{scored:,};"
             f" {overall.errors:,} errors)", ""]
    rows = []
    for t in sorted(data.targets(), key=_scored_rate)[:SUMMARY_ROWS]:
        interval = pass_rate_interval(t.hist)
        rows.append([escape_cell(t.key[1]), escape_cell(target_name(*t.key[2:])), str(t.n),
                     pct(interval.estimate) if interval.n_cases else DASH,
                     f"[{pct(interval.low)}, {pct(interval.high)}]" if interval.n_cases else DASH,
                     str(t.errors), f"{t.cost_usd:.4f}"])
    if rows:
        lines.append(md_table(rows, ["Eval", "Target", "N", "Pass rate", "95% CI", "Errors", "Cost USD"]))
    if any(doc["targets"] for doc in data.judges):
        lines += ["", "**Judge-corrected pass rates** (Rogan-Gladen, from people's labels):", "",
                  _corrected_table(data.judges, SUMMARY_ROWS)]
    worse = [r for r in data.comparisons if verdict(r.get("paired")) == "🔻 worse"]
    if worse:
        lines += ["", "**Significant regressions** (case-paired test, Holm-adjusted):", "",
                  comparison_table(worse)]
    return visible("\n".join(lines).rstrip()) + "\n"
