"""The one-screen terminal summary and the CI gates' lines (:mod:`evalhydra.analysis` computes them).

Gates (:class:`~evalhydra.analysis.gates.Gates`): ``run.fail_under`` (every eval × service × model),
per-eval thresholds (a mapping from eval id, or group, to a minimum pass rate;
an eval id wins over its group, which wins over ``fail_under``), and
``run.fail_under_pass_hat_k`` (a minimum pass^k). A gate compares the pass
rate over scored results (the mean over cases of each case's pass fraction):
infrastructure errors are reported apart and never lower it. When
``$GITHUB_STEP_SUMMARY`` is set, the run's short ``summary.md`` is appended to it.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from evalhydra.analysis.evalstats import Totals
from evalhydra.analysis.gates import GateFailure, Gates, failing_stats, top_fix
from evalhydra.analysis.graders import grader_rows
from evalhydra.analysis.runfacts import (
    Reasons,
    duration_s,
    error_reasons,
    failing_cases,
    reused_errors,
    reused_results,
)
from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.targetstats import TargetStats, store_stats
from evalhydra.core.text import command_line, visible
from evalhydra.core.usercode import USER_THREADS
from evalhydra.stats.clustered import CLUSTERED_WILSON
from evalhydra.store.db import Store

__all__ = [
    "append_step_summary",
    "corrected_rows",
    "escape_md",
    "gate_text",
    "gate_verdict_md",
    "plural",
    "print_corrected",
    "print_gate_failures",
    "print_run_summary",
    "run_gate",
]


DASH = "—"


def _table(stats: Sequence[TargetStats], tablefmt: str) -> str:
    streamed = any(s.ttft_p50_ms is not None for s in stats)
    table = [[s.eval, s.service, s.model, s.n, s.n_cases, *_rate_cells(s), s.p50_ms,
              s.p95_ms, *(_ttft_cells(s) if streamed else []), s.retried, s.errors] for s in stats]
    headers = ["eval", "service", "model", "n", "cases", "pass", "95% CI", "p50 ms", "p95 ms",
               *(["ttft p50", "ttft p95"] if streamed else []), "retried", "errors"]
    return tabulate(table, headers=headers, tablefmt=tablefmt)


def _ttft_cells(stat: TargetStats) -> list[str]:
    """Time to first token next to the latency (a target that did not stream has none)."""
    if stat.ttft_p50_ms is None or stat.ttft_p95_ms is None:
        return [DASH, DASH]
    return [f"{stat.ttft_p50_ms:.0f}", f"{stat.ttft_p95_ms:.0f}"]


def _rate_cells(stat: TargetStats) -> list[str]:
    """Pass rate and interval; a target with no scored cell has neither (not 0 %)."""
    if not stat.scored:
        return [DASH, DASH]
    return [f"{stat.pass_rate:.1%}", f"[{stat.ci_low:.1%}, {stat.ci_high:.1%}]"]


def print_run_summary(store: Store, outcome: Any, out_dir: Path, *, header: str | None = None,
                      hints: Sequence[str] = (), pass_hat_k: int | None = None,
                      judges: bool | None = None,
                      summary: Mapping[str, Any] | None = None,
                      totals: Totals | None = None) -> list[TargetStats]:
    """Print a run's one-screen summary (computed in SQL); return the stats for :func:`run_gate`.

    In order: ``header`` (the registry and store used), the per-target table, the
    top error reasons per target, up to five failing cases with the command that
    lists the rest, the totals (duration, tokens, cost, stored errors reused),
    ``hints`` (a fix per problem), and where the reports are. ``summary`` (the run's
    :func:`~evalhydra.analysis.runsummary.run_summary`) names the targets' judges; ``totals``, its
    per-target totals when the reports computed them.
    """
    stats = store_stats(store, [outcome.run_id], pass_hat_k=pass_hat_k, judges=judges, summary=summary,
                        totals=totals)
    if header:
        print(header)
    print(visible(_table(stats, "simple")))
    if any(s.ci_method == CLUSTERED_WILSON for s in stats):
        print("pass rate: mean over cases of each case's pass fraction; 95% CI clustered by case")
    _print_graders(grader_rows(store.conn, select_runs(store.conn, [outcome.run_id])))
    print_corrected(stats)
    _print_errors(error_reasons(store, [outcome.run_id]))
    _print_failing(failing_cases(store, [outcome.run_id]), outcome.run_id)
    _print_totals(store, outcome, stats)
    for hint in hints:
        print(f"fix: {hint}")
    print(f"reports: {out_dir}")
    return stats


def corrected_rows(stats: Sequence[TargetStats]) -> list[dict[str, Any]]:
    """Per judged target: the judge, its labels and κ, the judged and the corrected pass rate."""
    rows = []
    for s in stats:
        j = s.judged
        if j is None or not s.scored:
            continue
        fixed = (f"{j.corrected_pass_rate:.1%} [{j.corrected_ci_low:.1%}, {j.corrected_ci_high:.1%}]"
                 if j.corrected_pass_rate is not None else j.corrected_problem or DASH)
        rows.append({"eval": s.eval, "target": f"{s.service}/{s.model or ''}",
                     "judge": j.judge or DASH, "labels": j.judge_labels,
                     "kappa": DASH if j.judge_kappa is None else f"{j.judge_kappa:.2f}",
                     "judged pass": f"{s.pass_rate:.1%}", "corrected [95% CI]": fixed})
    return rows


def print_corrected(stats: Sequence[TargetStats]) -> None:
    """The judge-corrected pass rates, when a judge scored a target and the store holds labels."""
    rows = corrected_rows(stats)
    if not rows:
        return
    print("\njudge-corrected pass rates (Rogan-Gladen; 95% CI carries the cases' and the labels' variance):")
    print(visible(tabulate(rows, headers="keys", tablefmt="simple")))


def _print_graders(rows: Sequence[Mapping[str, Any]]) -> None:
    """Each OpenAI Evals criterion's pass rate and mean score per target (nothing without any)."""
    if not rows:
        return
    table = [{"eval": g["eval"], "target": f"{g['service']}/{g['model']}", "grader": g["grader"],
              "results": g["n"], "pass": f"{100 * g['pass_rate']:.1f}%",
              "mean score": DASH if g["mean_score"] is None else f"{g['mean_score']:.4g}"} for g in rows]
    print("graders (each testing criterion; a result passes when all pass):")
    print(visible(tabulate(table, headers="keys", tablefmt="simple")))


def _print_errors(reasons: Reasons) -> None:
    """One line per (service, model, reason): the same failure across many evals is one line."""
    if not reasons:
        return
    print("\nerrors (infrastructure: neither passed nor failed):")
    grouped: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for (eval_id, service, model), items in reasons.items():
        for reason, n in items:
            grouped.setdefault((service, model, reason), []).append((eval_id, n))
    for (service, model, reason), evals in grouped.items():
        cells = sum(n for _, n in evals)
        where = evals[0][0] if len(evals) == 1 else f"{len(evals)} evals"
        print(visible(f"  {where} on {service}/{model}: {reason} — {plural(cells, 'cell')}", lines=False))


def plural(n: int, noun: str) -> str:
    """``1 cell``, ``2 cells``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _print_failing(rows: Sequence[Mapping[str, Any]], run_id: str, limit: int = 5) -> None:
    if not rows:
        return
    print("\nfailing cases:")
    for r in rows[:limit]:
        reason = textwrap.shorten(r["failure_reason"], 100, placeholder=" …") if r["failure_reason"] else ""
        print(visible(f"  {r['eval_id']} {r['case_id']} trial {r['run_index']} on {r['service_name']}/"
                      f"{r['model']}: {reason}".rstrip(": ") + both_sides(r), lines=False))
    if len(rows) > limit:
        print(f"  … more: {command_line('evalhydra', 'results', run_id, '--status', 'FAIL')}")


def _quoted(text: Any) -> str:
    """``'text'`` on one line, cut at 60 characters."""
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= 60 else flat[:59] + "…")


def both_sides(row: Mapping[str, Any]) -> str:
    """`` (expected 'Vienna' in output 'Springfield')``: what was expected and what came, for a
    failing case's line; the output alone when the case has no ideal."""
    output = row.get("output")
    if output is None:
        return ""
    ideal = row.get("ideal")
    if ideal is None:
        return f" (output {_quoted(output)})"
    joint = " in" if "includ" in str(row.get("failure_reason") or "") else ","
    return f" (expected {_quoted(ideal)}{joint} output {_quoted(output)})"


def _print_totals(store: Store, outcome: Any, stats: Sequence[TargetStats]) -> None:
    total, passed = sum(s.n for s in stats), sum(s.passed for s in stats)
    errors = sum(s.errors for s in stats)
    tokens = sum(s.input_tokens + s.output_tokens for s in stats)
    thinking = sum(s.reasoning_tokens for s in stats)
    cost = sum(s.cost_usd for s in stats)
    duration = duration_s(store, outcome.run_id)
    print(f"\nrun {outcome.run_id}: {plural(total, 'cell')}, {passed} passed, {total - passed - errors} "
          f"failed, {plural(errors, 'error')} ({outcome.executed} run now, {outcome.skipped} resumed from "
          "the store)")
    spent = f" ({thinking} of them thinking)" if thinking else ""
    print(f"duration {duration:.1f} s, {tokens} tokens{spent}, ${cost:.4f}")
    _print_held(outcome)
    _print_cache_hits(store, outcome.run_id)
    _print_batched(store, outcome.run_id)
    _print_reused(store, outcome.run_id)
    if USER_THREADS.report():
        print(USER_THREADS.report())
    reused = reused_errors(store, outcome.run_id)
    if reused:
        print(f"{reused} stored error{'s' if reused != 1 else ''} reused from earlier runs; "
              "re-send them with run.retry_errors=true (a 4xx too: run.retry_errors=all)")


def _print_reused(store: Store, run_id: str) -> None:
    """Where the cells this run did not send came from, and how to send them again."""
    found = reused_results(store, run_id)
    if not found:
        return
    shown = ", ".join(f"{n} from {r} ({at[:19].replace('T', ' ')})" for r, at, n in found[:3])
    more = f", and {len(found) - 3} more run(s)" if len(found) > 3 else ""
    print(f"{plural(sum(n for _, _, n in found), 'stored result')} reused, not asked again: {shown}{more};"
          " ask again with run.fresh=true (only the failed cases: run.rerun=failed), or name what"
          " changed behind the URL with service.revision=…")


def _print_held(outcome: Any) -> None:
    """Cells this run left to another live run on the same store (see :mod:`evalhydra.store.claims`)."""
    held = getattr(outcome, "held_elsewhere", 0)
    if not held:
        return
    cells = f"{held} pending cell{'s' if held != 1 else ''}"
    holders = f"run{'s' if len(outcome.holders) != 1 else ''} {', '.join(sorted(outcome.holders))}"
    if outcome.executed:
        print(f"{cells} left to {holders}: another process on this store is sending them; "
              "its report has them.")
    else:
        print(f"nothing to claim: {holders} (another process on this store) holds all {cells}; "
              "its report will have them.")


def _print_cache_hits(store: Store, run_id: str) -> None:
    """How many of the run's answers the response cache gave, and what they would have cost."""
    # a run's own rows are its members that name it: read by run id, not through every membership
    sql = "select count(*), coalesce(sum(saved_usd), 0) from results where run_id = ? and cached = 1"
    hits, saved = store.conn.execute(sql, [run_id]).fetchone()
    if hits:
        print(f"cache: {plural(hits, 'answer')} from the response cache (nothing sent), ${saved:.4f} not paid"
              " again; cache.enabled=false measures the model afresh")


def _print_batched(store: Store, run_id: str) -> None:
    """How many of the run's cells batch jobs answered, and what the batch price saved."""
    sql = ("select count(*), coalesce(sum(saved_usd), 0), coalesce(sum(cost_usd), 0) from results"
           " where run_id = ? and batched = 1")
    cells, saved, paid = store.conn.execute(sql, [run_id]).fetchone()
    if cells:
        print(f"batch: {plural(cells, 'cell')} answered through batch jobs, ${paid:.4f} paid,"
              f" ${saved:.4f} saved against the online price")


def append_step_summary(out_dir: Path) -> bool:
    """Append ``out_dir/summary.md`` to ``$GITHUB_STEP_SUMMARY`` when both exist."""
    target = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    source = Path(out_dir) / "summary.md"
    if not target or not source.exists():
        return False
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(source.read_text(encoding="utf-8") + "\n")
    return True


def gate_verdict_md(failing: Sequence[GateFailure], cases: Sequence[Mapping[str, Any]]) -> str:
    """The gates' verdict as Markdown for ``summary.md``: passed, or what failed and the first
    failing cases."""
    if not failing:
        return "\n**Gates passed.**\n"
    lines = ["", f"**Gate failed** ({plural(len(failing), 'target')} under a threshold):", ""]
    lines += [f"- `{escape_md(f.stat.eval)}` on `{escape_md(f.stat.service)}/"
              f"{escape_md(f.stat.model or '')}`: {gate_text(f)}" for f in failing[:10]]
    if cases:
        lines += ["", "Failing cases:", ""]
        lines += [f"- `{escape_md(c['eval_id'])}` `{escape_md(c['case_id'])}` trial {c['run_index']}: "
                  f"{escape_md(textwrap.shorten(c['failure_reason'] or '', 100, placeholder=' …'))}"
                  for c in cases[:10]]
    return "\n".join(lines) + "\n"


def escape_md(value: Any) -> str:
    """Text made safe inside Markdown code spans and list items: one line, no backticks."""
    return visible(str(value), lines=False).replace("`", "'")


def gate_text(failed: GateFailure) -> str:
    """``pass rate 50.0% < 90.0%``, ``judge labels 12 < 50``: what a failing gate measured."""
    value = DASH if failed.value is None else format(failed.value, failed.shape)
    return f"{failed.metric} {value} < {format(failed.threshold, failed.shape)}"


def print_gate_failures(failing: Sequence[GateFailure], top_fix: str | None) -> None:
    """Print the worst failing gates (at most five) and the most common suggested fix."""
    for f in failing[:5]:
        print(visible(f"⚠ {f.stat.eval} on {f.stat.service}/{f.stat.model}: {gate_text(f)}", lines=False),
              file=sys.stderr)
    if len(failing) > 5:
        print(f"⚠ … and {len(failing) - 5} more below their threshold", file=sys.stderr)
    if failing and top_fix:
        print(visible(f"top suggested fix: {top_fix}", lines=False), file=sys.stderr)


def run_gate(store: Store, run_ids: Sequence[str], gates: Gates,
             stats: list[TargetStats] | None = None) -> list[GateFailure]:
    """Targets under a gate (worst first, see :func:`failing_stats`); prints them and the
    most common suggested fix. Exit 1 when this returns anything."""
    if stats is None:
        stats = store_stats(store, run_ids, pass_hat_k=gates.pass_hat_k, judges=gates.judged or None)
    failing = failing_stats(stats, gates)
    top = top_fix(store, run_ids) if failing else None
    print_gate_failures(failing, top)
    return failing
