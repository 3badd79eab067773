"""Reference implementations (tests only): the summary stats and gates from result rows in Python.

The shipped summary computes them in SQL (:mod:`evalhydra.reports.summary`);
tests check both give the same answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from evalhydra.analysis.gates import GateFailure, Gates, failing_stats
from evalhydra.analysis.targetstats import TargetStats, consistency
from evalhydra.reports.summary import print_gate_failures
from evalhydra.stats.clustered import pass_rate_interval
from evalhydra.stats.rates import nearest_rank
from evalhydra.store.rows import is_infra_error

__all__ = ["gate_failures", "group_stats"]


def group_stats(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per eval × service × model: counts, pass rate and its interval, pass^k, latency, retries, errors."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["eval_id"], row["service_name"], row["model"]), []).append(row)
    out = []
    for (eval_id, service, model), items in groups.items():
        scored = [r for r in items if not is_infra_error(r.get("error_kind"), r.get("status"))]
        passed = sum(1 for r in scored if r.get("passed"))
        lat = sorted(int(r.get("latency_ms") or 0) for r in items)
        hist = _case_histogram(scored)
        rate = pass_rate_interval(hist)
        k, hat = consistency(hist, None)
        out.append({
            "group": items[0].get("group"),
            "eval": eval_id, "service": service, "model": model, "n": len(items),
            "passed": passed, "errors": len(items) - len(scored), "scored": len(scored),
            "input_tokens": _tokens(items, "prompt_tokens", "judge_prompt_tokens"),
            "output_tokens": _tokens(items, "completion_tokens", "judge_completion_tokens"),
            # infrastructure errors are reported apart: they never lower the pass rate
            "pass_rate": rate.estimate, "ci_low": rate.low, "ci_high": rate.high,
            "ci_method": rate.method, "n_cases": rate.n_cases, "pass_hat_k": hat, "k": k,
            "p50_ms": nearest_rank(lat, 50), "p95_ms": nearest_rank(lat, 95),
            "reasoning_tokens": _tokens(items, "reasoning_tokens"), **_first_token(items),
            "retried": sum(1 for r in items if r.get("retried")),
            "cost_usd": sum((r.get("cost_usd") or 0) + (r.get("judge_cost_usd") or 0) for r in items),
        })
    return out


def _first_token(items: list[dict[str, Any]]) -> dict[str, float | None]:
    """Nearest-rank p50/p95 of the streamed results' times to first token and to the answer."""
    first = sorted(r["ttft_ms"] for r in items if r.get("ttft_ms") is not None)
    answer = sorted(r["first_answer_ms"] for r in items if r.get("first_answer_ms") is not None)
    return {"ttft_p50_ms": nearest_rank(first, 50) if first else None,
            "ttft_p95_ms": nearest_rank(first, 95) if first else None,
            "first_answer_p50_ms": nearest_rank(answer, 50) if answer else None,
            "first_answer_p95_ms": nearest_rank(answer, 95) if answer else None}


def _case_histogram(scored: list[dict[str, Any]]) -> Counter[tuple[int, int]]:
    """(scored trials, passed trials) -> cases, counted row by row."""
    per_case: dict[str, list[int]] = {}
    for r in scored:
        per_case.setdefault(r["case_id"], []).append(1 if r.get("passed") else 0)
    return Counter((len(v), sum(v)) for v in per_case.values())


def gate_failures(rows: list[dict[str, Any]], threshold: float | None,
                  per_eval: Mapping[str, float] | None = None,
                  pass_hat_k_under: float | None = None) -> list[GateFailure]:
    """Evals whose pass rate is below their threshold; prints the worst and the top fix.

    Args:
        rows: The run's result rows.
        threshold: ``run.fail_under`` (None: only per-eval thresholds apply).
        per_eval: Minimum pass rate per eval id or group.

    Returns:
        The failing stats (worst first), each with its ``threshold``.
    """
    stats = [TargetStats(**stat) for stat in group_stats(rows)]
    failing = failing_stats(stats, Gates(threshold, dict(per_eval or {}), pass_hat_k_under))
    fixes = [r["suggested_fix"] for r in rows if r.get("suggested_fix") and not r.get("passed")]
    print_gate_failures(failing, max(sorted(set(fixes)), key=fixes.count) if fixes else None)
    return failing


def _tokens(rows: list[dict[str, Any]], *columns: str) -> int:
    return sum(r.get(c) or 0 for r in rows for c in columns)
