"""Reference implementations (tests only): the summary stats and gates from result rows in Python.

The shipped summary computes them in SQL (:mod:`evalhydra.reports.summary`);
tests check both give the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalhydra.reports.stats import nearest_rank, wilson_interval
from evalhydra.reports.summary import failing_stats, print_gate_failures
from evalhydra.store.rows import is_infra_error

__all__ = ["gate_failures", "group_stats"]


def group_stats(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per eval × service × model: counts, pass rate, Wilson CI, latency, retries, errors."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["eval_id"], row["service_name"], row["model"]), []).append(row)
    out = []
    for (eval_id, service, model), items in groups.items():
        scored = [r for r in items if not is_infra_error(r.get("error_kind"), r.get("status"))]
        passed = sum(1 for r in scored if r.get("passed"))
        lat = sorted(int(r.get("latency_ms") or 0) for r in items)
        low, high = wilson_interval(passed, len(scored))
        out.append({
            "group": items[0].get("group"),
            "eval": eval_id, "service": service, "model": model, "n": len(items),
            "passed": passed, "errors": len(items) - len(scored), "scored": len(scored),
            "input_tokens": _tokens(items, "prompt_tokens", "judge_prompt_tokens"),
            "output_tokens": _tokens(items, "completion_tokens", "judge_completion_tokens"),
            # infrastructure errors are reported apart: they never lower the pass rate
            "pass_rate": passed / len(scored) if scored else 0.0, "ci_low": low, "ci_high": high,
            "p50_ms": nearest_rank(lat, 50), "p95_ms": nearest_rank(lat, 95),
            "retried": sum(1 for r in items if r.get("retried")),
            "cost_usd": sum((r.get("cost_usd") or 0) + (r.get("judge_cost_usd") or 0) for r in items),
        })
    return out


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
    failing = failing_stats(group_stats(rows), threshold, per_eval)
    fixes = [r["suggested_fix"] for r in rows if r.get("suggested_fix") and not r.get("passed")]
    print_gate_failures(failing, max(sorted(set(fixes)), key=fixes.count) if fixes else None)
    return failing


def _tokens(rows: list[dict[str, Any]], *columns: str) -> int:
    return sum(r.get(c) or 0 for r in rows for c in columns)
