"""The one-screen terminal summary and the CI gates, computed in SQL.

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

from evalhydra.reports.evalstats import evals_and_targets
from evalhydra.reports.selection import select_runs
from evalhydra.stats import wilson_interval
from evalhydra.store.db import Store

__all__ = [
    "append_step_summary",
    "failing_stats",
    "print_gate_failures",
    "print_run_summary",
    "run_gate",
    "store_stats",
    "threshold_for",
]


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


def store_stats(store: Store, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per eval × service × model: counts, pass rate, Wilson CI, latency, retries, errors, cost."""
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


def print_run_summary(store: Store, outcome: Any, out_dir: Path) -> list[dict[str, Any]]:
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


def failing_stats(stats: Iterable[dict[str, Any]], threshold: float | None,
             per_eval: Mapping[str, float] | None) -> list[dict[str, Any]]:
    failing = []
    for s in stats:
        limit = threshold_for(s, threshold, per_eval)
        if limit is not None and s["pass_rate"] < limit:
            failing.append({**s, "threshold": limit})
    return sorted(failing, key=lambda s: (s["pass_rate"] - s["threshold"], s["eval"]))


def run_gate(store: Store, run_ids: Sequence[str], threshold: float | None,
             per_eval: Mapping[str, float] | None = None,
             stats: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Evals whose pass rate is below their threshold (worst first, each with its
    ``threshold``); prints them and the most common suggested fix. Exit 1 when this
    returns anything."""
    failing = failing_stats(stats if stats is not None else store_stats(store, run_ids), threshold, per_eval)
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
