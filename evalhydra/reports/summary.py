"""The one-screen terminal summary, the dry-run plan and the CI gate."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tabulate import tabulate

__all__ = ["gate_failures", "group_stats", "print_dry_run", "print_summary", "summary_table"]


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
            "eval": eval_id, "service": service, "model": model, "n": len(items),
            "passed": passed, "errors": len(items) - len(scored),
            # infrastructure errors are reported apart: they never lower the pass rate
            "pass_rate": passed / len(scored) if scored else 0.0, "ci_low": low, "ci_high": high,
            "p50_ms": nearest_rank(lat, 50), "p95_ms": nearest_rank(lat, 95),
            "retried": sum(1 for r in items if r.get("retried")),
            "cost_usd": sum((r.get("cost_usd") or 0) + (r.get("judge_cost_usd") or 0) for r in items),
        })
    return out


def summary_table(rows: Iterable[dict[str, Any]], tablefmt: str = "simple") -> str:
    """The summary as a table string."""
    stats = group_stats(rows)
    table = [[s["eval"], s["service"], s["model"], s["n"], f"{s['pass_rate']:.1%}",
              f"[{s['ci_low']:.1%}, {s['ci_high']:.1%}]", s["p50_ms"], s["p95_ms"], s["retried"],
              s["errors"]] for s in stats]
    headers = ["eval", "service", "model", "n", "pass", "95% CI", "p50 ms", "p95 ms", "retried", "errors"]
    return tabulate(table, headers=headers, tablefmt=tablefmt)


def print_summary(rows: list[dict[str, Any]], outcome: Any, out_dir: Path) -> None:
    """Print the end-of-run summary (stdout) — one screen."""
    print(summary_table(rows))
    total_pass = sum(1 for r in rows if r.get("passed"))
    print(f"\nrun {outcome.run_id}: {len(rows)} cells, {total_pass} passed, "
          f"{sum(1 for r in rows if r.get('error_kind'))} errors "
          f"({outcome.executed} run now, {outcome.skipped} resumed from the store)")
    print(f"reports: {out_dir}")


def gate_failures(rows: list[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    """Evals whose pass rate is below ``threshold``; prints the worst and the top fix."""
    stats = sorted(group_stats(rows), key=lambda s: s["pass_rate"])
    failing = [s for s in stats if s["pass_rate"] < threshold]
    for s in failing[:5]:
        print(f"⚠ {s['eval']} on {s['service']}/{s['model']}: pass rate {s['pass_rate']:.1%} "
              f"< {threshold:.1%}", file=sys.stderr)
    fixes = [r["suggested_fix"] for r in rows if r.get("suggested_fix") and not r.get("passed")]
    if failing and fixes:
        print(f"top suggested fix: {max(set(fixes), key=fixes.count)}", file=sys.stderr)
    return failing


def print_dry_run(plan: Any, total: int) -> None:
    """Print the planned cells per eval × service × model, with a rough token/cost estimate."""
    from evalhydra.runner import _cases

    rows = []
    cost = 0.0
    pricing = plan.service.pricing
    for ev in plan.evals:
        cases = list(_cases(plan, ev))
        chars = sum(len(str(getattr(c, "input", "") or "")) for c in cases)
        tokens = (chars // 4 + 16 * len(cases)) * ev.trials
        est = tokens * pricing.input_per_mtok / 1e6 + 64 * len(cases) * ev.trials * pricing.output_per_mtok / 1e6
        cost += est
        rows.append([ev.id, plan.service.name, plan.model, len(cases), ev.trials, len(cases) * ev.trials,
                     tokens, f"${est:.4f}"])
    print(tabulate(rows, headers=["eval", "service", "model", "cases", "trials", "cells",
                                  "est. input tokens", "est. cost"]))
    print(f"\ndry run: {total} cells planned, estimated cost ${cost:.4f}; no call was made.")
