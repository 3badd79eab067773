"""``evalhydra compare``'s text: the comparison (:mod:`evalhydra.analysis.comparison` computes it)
as a table with the changed cases, the precision and the verdict lines, or Markdown, or JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from evalhydra.analysis.compare import ALPHA, is_improvement, is_regression
from evalhydra.analysis.comparison import Comparison, block_of, regressions
from evalhydra.reports.markdown import comparison_table
from evalhydra.stats.power import MIN_CASES

__all__ = ["render"]


def _case_lines(rows: Sequence[dict[str, Any]], key: str, limit: int) -> list[str]:
    lines = []
    for r in rows:
        cases = (r["paired"] or {}).get(key) or []
        if cases:
            more = f", … {len(cases) - limit} more" if len(cases) > limit else ""
            lines.append(f"  {r['eval_id']}: {', '.join(cases[:limit])}{more}")
    return lines


def _lists(result: Comparison, limit: int) -> list[str]:
    out = []
    for key, title in (("regressed", "regressed (lower pass fraction on the candidate)"),
                       ("improved", "improved (higher pass fraction on the candidate)"),
                       ("judge_flips", "judge-only flips (same output, other verdict; case#trial)")):
        count = sum(len((r["paired"] or {}).get(key) or []) for r in result.rows)
        out += ["", f"{title}: {count} case(s)", *_case_lines(result.rows, key, limit)]
    return out


def _verdict_line(result: Comparison) -> str:
    worse = regressions(result)
    after = " after judge correction" if result.judge_corrected else ""
    if not any(r["paired"] for r in [*result.rows, result.overall]):
        return "verdict: no cases in common; paired statistics are not available"
    if worse:
        names = ", ".join(r["eval_id"] for r in worse)
        return (f"verdict: REGRESSION{after}: the candidate is significantly worse on {names}"
                " (Holm-adjusted p < 0.05)")
    tested = [*result.rows, result.overall] if len(result.rows) > 1 else result.rows
    explained = [r["eval_id"] for r in tested if result.judge_corrected
                 and is_regression(r["paired"]) and not is_regression(block_of(result, r))]
    note = (f"; the raw regression on {', '.join(explained)} is not significant after judge correction"
            if explained else "")
    better = [r for r in [*result.rows, result.overall] if is_improvement(block_of(result, r))]
    if better:
        return (f"verdict: improvement{after} on {', '.join(r['eval_id'] for r in better)};"
                f" no significant regression{note}")
    overall = block_of(result, result.overall) or {}
    if str(overall.get("verdict", "")).startswith("cannot reach"):
        return f"verdict: cannot tell{after}: {overall['verdict']}{note}"
    return f"verdict: no significant change{after} (no Holm-adjusted p-value below 0.05){note}"


def _corrected_lines(result: Comparison) -> list[str]:
    """Each eval's and the pooled judge-corrected difference, or why it has none."""
    if not result.judge_corrected:
        return []
    out = ["", "judge-corrected difference (Rogan-Gladen per case; 95% CI with the labels' variance):"]
    for r in [*result.rows, result.overall] if len(result.rows) > 1 else result.rows:
        block = r.get("judge_corrected") or {}
        if block.get("difference") is None:
            out.append(f"  {r['eval_id']}: not corrected: {block.get('problem') or 'no judge'}")
            continue
        out.append(f"  {r['eval_id']}: {block['difference'] * 100:+z.1f} points"
                   f" [{block['ci_low'] * 100:+z.1f}, {block['ci_high'] * 100:+z.1f}],"
                   f" p = {block['p_value']:.3g}"
                   f" (Holm {block['p_holm']:.3g}): {block['verdict']}; judges: baseline"
                   f" {block['baseline_judge']} ({block['baseline_labels']} labels), candidate"
                   f" {block['candidate_judge']} ({block['candidate_labels']} labels)")
    return out


def _precision_line(result: Comparison) -> list[str]:
    info = result.precision
    if not info or not info["underpowered"] or regressions(result):
        return []
    if not info["reachable"]:
        return ["", f"cannot reach p < {ALPHA:g} with {info['cases']} shared case(s): even a drop on every"
                    f" case gives p = {0.5 ** info['cases']:.3g}; the gate needs at least {MIN_CASES} cases"
                    " (evalhydra power tells how many detect a given drop)."]
    line = (f"underpowered: with {info['cases']} cases × {info['trials']} trial(s) this comparison detects"
            f" (80% power) only drops of {info['min_detectable'] * 100:.1f} points or more, not"
            f" {info['target'] * 100:g}")
    if info["cases_needed"]:
        line += f"; about {info['cases_needed']:,} cases at {info['trials']} trial(s) would"
    return ["", line + " (evalhydra power tells how trials and cases trade off)."]


def render(result: Comparison, fmt: str = "text", limit: int = 50) -> str:
    """The comparison as ``text``, ``md`` or ``json``."""
    if fmt == "json":
        return json.dumps(result.to_json(), indent=2, ensure_ascii=False)
    table: Callable[[list[dict[str, Any]]], str] = (
        (lambda rows: comparison_table(rows)) if fmt == "md"
        else (lambda rows: comparison_table(rows, tablefmt="simple")))
    head = [f"baseline:  {result.baseline}", f"candidate: {result.candidate}"]
    if any(result.errors):
        head.append(f"infrastructure errors left out: {result.errors[0]} baseline,"
                    f" {result.errors[1]} candidate")
    for eval_id, side in sorted(result.one_sided.items()):
        head.append(f"{eval_id}: not run on the {side}; left out")
    head.append("")
    body = table([*result.rows, result.overall])
    return "\n".join([*head, body, *_lists(result, limit), *_precision_line(result),
                      *_first_token_line(result), *_corrected_lines(result), "", _verdict_line(result)])


def _first_token_line(result: Comparison) -> list[str]:
    first = result.first_token
    if first is None:
        return []
    return ["", f"time to first token ({first['cases']} cases streamed on both sides): baseline median"
                f" {first['baseline_median_ms']:.0f} ms, candidate {first['candidate_median_ms']:.0f} ms;"
                f" paired difference {first['difference_median_ms']:+z.0f} ms"
                f" (95% CI {first['ci_low_ms']:+z.0f} to {first['ci_high_ms']:+z.0f})"]
