"""The one-screen terminal summary, the dry-run plan and the CI gates.

Gates: ``run.fail_under`` (every eval × service × model) and per-eval
thresholds (a mapping from eval id, or group, to a minimum pass rate; an eval
id wins over its group, which wins over ``fail_under``). A gate compares the
pass rate over scored results: infrastructure errors are reported apart and
never lower it. When ``$GITHUB_STEP_SUMMARY`` is set, the run's short
``summary.md`` is appended to it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

__all__ = [
    "append_step_summary",
    "gate_failures",
    "group_stats",
    "print_dry_run",
    "print_gate_failures",
    "print_run_summary",
    "run_gate",
    "store_stats",
    "threshold_for",
]


def group_stats(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per eval × service × model: counts, pass rate, Wilson CI, latency, retries, errors."""
    from evalhydra.stats import nearest_rank, wilson_interval

    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["eval_id"], row["service_name"], row["model"]), []).append(row)
    out = []
    for (eval_id, service, model), items in groups.items():
        scored = [r for r in items if r.get("error_kind") is None and r.get("status") != "ERROR"]
        passed = sum(1 for r in scored if r.get("passed"))
        lat = sorted(int(r.get("latency_ms") or 0) for r in items)
        low, high = wilson_interval(passed, len(scored))
        out.append({
            "group": items[0].get("group"),
            "eval": eval_id, "service": service, "model": model, "n": len(items),
            "passed": passed, "errors": len(items) - len(scored),
            # infrastructure errors are reported apart: they never lower the pass rate
            "pass_rate": passed / len(scored) if scored else 0.0, "ci_low": low, "ci_high": high,
            "p50_ms": nearest_rank(lat, 50), "p95_ms": nearest_rank(lat, 95),
            "retried": sum(1 for r in items if r.get("retried")),
            "cost_usd": sum((r.get("cost_usd") or 0) + (r.get("judge_cost_usd") or 0) for r in items),
        })
    return out


def _table(stats: Sequence[dict[str, Any]], tablefmt: str) -> str:
    table = [[s["eval"], s["service"], s["model"], s["n"], f"{s['pass_rate']:.1%}",
              f"[{s['ci_low']:.1%}, {s['ci_high']:.1%}]", s["p50_ms"], s["p95_ms"], s["retried"],
              s["errors"]] for s in stats]
    headers = ["eval", "service", "model", "n", "pass", "95% CI", "p50 ms", "p95 ms", "retried", "errors"]
    return tabulate(table, headers=headers, tablefmt=tablefmt)


def _print_totals(outcome: Any, total: int, passed: int, errors: int, out_dir: Path) -> None:
    print(f"\nrun {outcome.run_id}: {total} cells, {passed} passed, {errors} errors "
          f"({outcome.executed} run now, {outcome.skipped} resumed from the store)")
    print(f"reports: {out_dir}")
    append_step_summary(out_dir)


def store_stats(store: Any, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """:func:`group_stats` computed in SQL (for runs of any size)."""
    from evalhydra.reports.evalstats import evals_and_targets
    from evalhydra.reports.selection import select_runs
    from evalhydra.stats import wilson_interval

    doc, targets = evals_and_targets(store.conn, select_runs(store.conn, run_ids))
    out = []
    for ev in doc["evals"]:
        for svc in ev["services"]:
            for model in svc["models"]:
                t = targets[(ev["group"], ev["eval_id"], svc["service_name"], model["model"] or "")]
                scored = t.n - t.errors
                low, high = wilson_interval(t.passed, scored)
                latency = model["stats"]["latency"]
                out.append({
                    "group": ev["group"], "eval": ev["eval_id"], "service": svc["service_name"],
                    "model": model["model"], "n": t.n, "passed": t.passed, "errors": t.errors,
                    "pass_rate": t.passed / scored if scored else 0.0, "ci_low": low, "ci_high": high,
                    "p50_ms": latency["p50_ms"], "p95_ms": latency["p95_ms"],
                    "retried": model["stats"]["retries"]["retried_runs"], "cost_usd": t.cost_usd})
    return out


def print_run_summary(store: Any, outcome: Any, out_dir: Path) -> list[dict[str, Any]]:
    """Print a run's one-screen summary (computed in SQL); return the stats for :func:`run_gate`."""
    stats = store_stats(store, [outcome.run_id])
    print(_table(stats, "simple"))
    passed = sum(s["passed"] for s in stats)
    _print_totals(outcome, sum(s["n"] for s in stats), passed, sum(s["errors"] for s in stats), out_dir)
    return stats


def append_step_summary(out_dir: Path) -> bool:
    """Append ``out_dir/summary.md`` to ``$GITHUB_STEP_SUMMARY`` when both exist."""
    target = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    source = Path(out_dir) / "summary.md"
    if not target or not source.exists():
        return False
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(source.read_text(encoding="utf-8") + "\n")
    return True


def threshold_for(stat: Mapping[str, Any], fail_under: float | None,
                  per_eval: Mapping[str, float] | None) -> float | None:
    """The minimum pass rate of one eval: its id's, else its group's, else ``fail_under``."""
    per_eval = per_eval or {}
    for key in (stat.get("eval"), stat.get("group")):
        if key is not None and key in per_eval:
            return float(per_eval[key])
    return fail_under


def print_gate_failures(failing: Sequence[dict[str, Any]], top_fix: str | None) -> None:
    """Print the worst failing evals (at most five) and the most common suggested fix."""
    for s in failing[:5]:
        print(f"⚠ {s['eval']} on {s['service']}/{s['model']}: pass rate {s['pass_rate']:.1%} "
              f"< {s['threshold']:.1%}", file=sys.stderr)
    if len(failing) > 5:
        print(f"⚠ … and {len(failing) - 5} more below their threshold", file=sys.stderr)
    if failing and top_fix:
        print(f"top suggested fix: {top_fix}", file=sys.stderr)


def _failing(stats: Iterable[dict[str, Any]], threshold: float | None,
             per_eval: Mapping[str, float] | None) -> list[dict[str, Any]]:
    failing = []
    for s in stats:
        limit = threshold_for(s, threshold, per_eval)
        if limit is not None and s["pass_rate"] < limit:
            failing.append({**s, "threshold": limit})
    return sorted(failing, key=lambda s: (s["pass_rate"] - s["threshold"], s["eval"]))


def gate_failures(rows: list[dict[str, Any]], threshold: float | None,
                  per_eval: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """Evals whose pass rate is below their threshold; prints the worst and the top fix.

    Args:
        rows: The run's result rows.
        threshold: ``run.fail_under`` (None: only per-eval thresholds apply).
        per_eval: Minimum pass rate per eval id or group.

    Returns:
        The failing stats (worst first), each with its ``threshold``.
    """
    failing = _failing(group_stats(rows), threshold, per_eval)
    fixes = [r["suggested_fix"] for r in rows if r.get("suggested_fix") and not r.get("passed")]
    print_gate_failures(failing, max(sorted(set(fixes)), key=fixes.count) if fixes else None)
    return failing


def run_gate(store: Any, run_ids: Sequence[str], threshold: float | None,
             per_eval: Mapping[str, float] | None = None,
             stats: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """:func:`gate_failures` computed in SQL: exit 1 when this returns anything."""
    from evalhydra.reports.selection import select_runs

    failing = _failing(stats if stats is not None else store_stats(store, run_ids), threshold, per_eval)
    top = None
    if failing:
        sel = select_runs(store.conn, run_ids)
        row = store.conn.execute(
            f"select suggested_fix, count(*) as n from {sel.table} where ({sel.where}) and not passed"
            " and coalesce(suggested_fix, '') != '' group by suggested_fix order by n desc,"
            " suggested_fix limit 1", sel.params).fetchone()
        top = row[0] if row else None
    print_gate_failures(failing, top)
    return failing


def print_dry_run(plan: Any, total: int) -> None:
    """Print the planned cells per eval × service × model, with a rough token/cost estimate.

    Datasets are streamed; input tokens are estimated at four characters each.
    """
    from evalhydra.runner import iter_plan_cases

    rows = []
    cost = 0.0
    pricing = plan.service.pricing
    for ev in plan.evals:
        n_cases = chars = 0
        for case in iter_plan_cases(plan, ev):
            n_cases += 1
            chars += len(str(getattr(case, "input", "") or ""))
        tokens = (chars // 4 + 16 * n_cases) * ev.trials
        est = (tokens * pricing.input_per_mtok + 64 * n_cases * ev.trials * pricing.output_per_mtok) / 1e6
        cost += est
        rows.append([ev.id, plan.service.name, plan.model, n_cases, ev.trials, n_cases * ev.trials,
                     tokens, f"${est:.4f}"])
    print(tabulate(rows, headers=["eval", "service", "model", "cases", "trials", "cells",
                                  "est. input tokens", "est. cost"]))
    print(f"\ndry run: {total} cells planned, estimated cost ${cost:.4f}; no call was made.")
