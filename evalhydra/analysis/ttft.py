"""Time to first token per target: what a user of a streamed answer waits for.

Only streamed answers store ``ttft_ms`` (the first content or reasoning delta) and
``first_answer_ms`` (the first answer delta, after any thinking); a report asks for these
percentiles only when its totals counted such results, so a store without streaming pays no
extra pass.
"""

from __future__ import annotations

import math
import sqlite3
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evalhydra.analysis.aggregate import Target, TargetAgg
from evalhydra.analysis.compare import Side
from evalhydra.analysis.selection import Selection
from evalhydra.stats.rates import nearest_rank

__all__ = ["FirstToken", "first_token_latency", "median_interval", "paired_first_token"]


@dataclass(frozen=True)
class FirstToken:
    """Nearest-rank percentiles of one target's streamed answers, in milliseconds.

    Attributes:
        n: Results with a time to first token.
        p50_ms, p95_ms: Time to the first token.
        answer_p50_ms, answer_p95_ms: Time to the first answer token (None when no answer
            token was timed: tool calls only, or thinking cut before an answer).
    """

    n: int
    p50_ms: float
    p95_ms: float
    answer_p50_ms: float | None
    answer_p95_ms: float | None


def first_token_latency(conn: sqlite3.Connection, sel: Selection,
                        targets: Iterable[TargetAgg]) -> dict[Target, FirstToken]:
    """Per target with streamed answers, the percentiles of their times to first token.

    Args:
        conn: The store.
        sel: The results covered.
        targets: Their totals (targets with no streamed result are skipped without a query).
    """
    if not any(t.streamed for t in targets):
        return {}
    sql = (f'select "group", eval_id, service_name, coalesce(model, \'\'), ttft_ms, first_answer_ms'
           f" from {sel.table} where ({sel.where}) and ttft_ms is not null")
    firsts: dict[Target, list[float]] = {}
    answers: dict[Target, list[float]] = {}
    for g, e, s, m, ttft, answer in conn.execute(sql, sel.params):
        firsts.setdefault((g, e, s, m), []).append(ttft)
        if answer is not None:
            answers.setdefault((g, e, s, m), []).append(answer)
    out = {}
    for key, values in firsts.items():
        values.sort()
        timed = sorted(answers.get(key, []))
        out[key] = FirstToken(len(values), nearest_rank(values, 50), nearest_rank(values, 95),
                              nearest_rank(timed, 50) if timed else None,
                              nearest_rank(timed, 95) if timed else None)
    return out


def _case_medians(conn: sqlite3.Connection, side: Side) -> dict[tuple[str, str, str], float]:
    """Per (group, eval, case), the median time to first token of its streamed trials."""
    table = "case_fractions" if side.fractions else "results"  # a saved case median is the median
    sql = (f'select "group", eval_id, case_id, ttft_ms from {table}'
           f" where ({side.where}) and ttft_ms is not null")
    values: dict[tuple[str, str, str], list[float]] = {}
    for g, e, c, ttft in conn.execute(sql, side.params):
        values.setdefault((g, e, c), []).append(ttft)
    return {key: statistics.median(times) for key, times in values.items()}


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for a median: the order statistics whose ranks a
    Binomial(n, 1/2) puts outside with at most ``1 − confidence`` in total.

    Args:
        values: The sample (at least one value).
        confidence: The coverage asked for (at least this much, as the binomial is discrete).

    Returns:
        (low, high); the sample's range when it is too small for the coverage.
    """
    ordered = sorted(values)
    n = len(ordered)
    tail, below, k = (1.0 - confidence) / 2.0, 0.0, 0
    while k < n and below + math.comb(n, k) / 2.0**n <= tail:
        below += math.comb(n, k) / 2.0**n
        k += 1
    if k == 0:
        return ordered[0], ordered[-1]
    return ordered[k - 1], ordered[n - k]


def paired_first_token(conn: sqlite3.Connection, base: Side, cand: Side) -> dict[str, Any] | None:
    """The candidate's time to first token against the baseline's, case by case.

    Each side's case median over its streamed trials; the cases both sides streamed are
    paired, and the median of their differences (candidate − baseline) is given with its
    distribution-free 95% interval (:func:`median_interval`).

    Args:
        conn: The store.
        base: The baseline.
        cand: The candidate.

    Returns:
        ``{cases, baseline_median_ms, candidate_median_ms, difference_median_ms, ci_low_ms,
        ci_high_ms}``, or None when no case streamed on both sides.
    """
    before, after = _case_medians(conn, base), _case_medians(conn, cand)
    shared = sorted(before.keys() & after.keys())
    if not shared:
        return None
    differences = [after[key] - before[key] for key in shared]
    low, high = median_interval(differences)
    return {"cases": len(shared),
            "baseline_median_ms": round(statistics.median(before[key] for key in shared), 1),
            "candidate_median_ms": round(statistics.median(after[key] for key in shared), 1),
            "difference_median_ms": round(statistics.median(differences), 1),
            "ci_low_ms": round(low, 1), "ci_high_ms": round(high, 1)}
