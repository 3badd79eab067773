"""zig_eval's statistics, shared by the SQL analyses (the text report is :mod:`evalhydra.reports.zig`).

* :data:`SCHEMA_VERSION` and :data:`CONFIDENCE_LEVEL` of zig_eval's JSON artifacts;
* :func:`stats_object`: the seed's stats object (pass rate, Wilson interval,
  latency, retries) from counts; :class:`LevelStats` accumulates them per level;
* :func:`percentile_buckets_sql`: nearest-rank p50/p95 from a latency histogram,
  inside SQLite.

Latency: zig_eval stores whole milliseconds, so every latency is rounded half
up to an integer (NULL counts as 0) before it enters ``runs.json`` or any
statistic. This keeps ``p50_ms``/``p95_ms`` integers, as in the seed. The
row-by-row Python versions that tests compare against are in
``tests/reference/zig.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalhydra.stats.rates import Z95, wilson_interval

__all__ = [
    "CONFIDENCE_LEVEL",
    "SCHEMA_VERSION",
    "LevelStats",
    "percentile_buckets_sql",
    "stats_object",
]

SCHEMA_VERSION = 2
CONFIDENCE_LEVEL = 0.95

Row = Mapping[str, Any]
PairKey = tuple[str, int]


# --- stats -------------------------------------------------------------------


def stats_object(
    total: int,
    passed: int,
    mean_ms: float,
    p50_ms: int,
    p95_ms: int,
    retried_runs: int,
    total_attempts: int,
) -> dict[str, Any]:
    """The seed's stats object from already-aggregated numbers.

    Args:
        total: Runs.
        passed: Passing runs.
        mean_ms: Mean latency.
        p50_ms: Nearest-rank median latency.
        p95_ms: Nearest-rank 95th percentile latency.
        retried_runs: Runs with ``retried`` set.
        total_attempts: Sum of ``attempt_count``.

    Returns:
        ``{counts, pass_rate, confidence_level, pass_rate_ci_low,
        pass_rate_ci_high, latency, retries}`` in that order.
    """
    low, high = wilson_interval(passed, total, Z95)
    return {
        "counts": {"total_runs": total, "passed": passed, "failed": total - passed},
        "pass_rate": passed / total if total else 0.0,
        "confidence_level": CONFIDENCE_LEVEL,
        "pass_rate_ci_low": low,
        "pass_rate_ci_high": high,
        "latency": {"mean_ms": float(mean_ms), "p50_ms": p50_ms, "p95_ms": p95_ms},
        "retries": {"retried_runs": retried_runs, "total_attempts": total_attempts},
    }


# --- grouping ----------------------------------------------------------------


# --- evals.json --------------------------------------------------------------


# --- evals.json in SQL -------------------------------------------------------


@dataclass
class LevelStats:
    """Aggregates fetched from SQLite for one eval, service or model (zig_eval stats inputs)."""

    total: int = 0
    passed: int = 0
    latency_sum: int = 0
    retried_runs: int = 0
    total_attempts: int = 0
    p50: int = 0
    p95: int = 0

    def add(self, row: Row, count_key: str = "n") -> None:
        """Add one SQL group's sums; ``count_key`` names its row-count column."""
        self.total += row[count_key]
        self.passed += row["passed"]
        self.latency_sum += row["latency_sum"]
        self.retried_runs += row["retried_runs"]
        self.total_attempts += row["total_attempts"]

    def stats(self) -> dict[str, Any]:
        mean = self.latency_sum / self.total if self.total else 0.0
        return stats_object(
            self.total,
            self.passed,
            mean,
            self.p50,
            self.p95,
            self.retried_runs,
            self.total_attempts,
        )


_LAT_SQL = "MAX(0, CAST(COALESCE(latency_ms, 0) + 0.5 AS INTEGER))"


def _rank_sql(p: int) -> str:
    """1-based nearest rank ``min(n, ceil(p·n/100))`` in integer SQL."""
    return f"MIN(n, ({p} * n + 99) / 100)"


def _windows_sql(hist: str) -> str:
    """CTEs ``levels`` and ``cumulative`` over a histogram CTE named ``hist``
    (columns ``g, e, s, m, lat, c``), and the condition picking the buckets
    that hold the p50/p95 nearest ranks."""
    return f"""
        levels AS (
            SELECT 0 AS lvl, g, e, NULL AS s, NULL AS m, lat, SUM(c) AS c
              FROM {hist} GROUP BY g, e, lat
            UNION ALL
            SELECT 1, g, e, s, NULL, lat, SUM(c) FROM {hist} GROUP BY g, e, s, lat
            UNION ALL
            SELECT 2, g, e, s, m, lat, c FROM {hist}),
        cumulative AS (
            SELECT lvl, g, e, s, m, lat, c,
                   SUM(c) OVER (PARTITION BY lvl, g, e, s, m ORDER BY lat
                                ROWS UNBOUNDED PRECEDING) AS cum,
                   SUM(c) OVER (PARTITION BY lvl, g, e, s, m) AS n
              FROM levels)"""


_PICKS = " OR ".join(f"(cum - c < {_rank_sql(p)} AND cum >= {_rank_sql(p)})" for p in (50, 95))


def percentile_buckets_sql(hist: str) -> tuple[str, str]:
    """SQL to pick the p50/p95 buckets from a latency histogram CTE.

    Args:
        hist: Name of a CTE with columns ``g, e, s, m, lat, c`` (one row per
            eval, service, model and whole-millisecond latency).

    Returns:
        ``(ctes, condition)``: the CTE definitions ``levels, cumulative`` to
        append after ``hist`` in a ``WITH`` clause, and the condition that,
        applied to ``cumulative`` (columns ``lvl, g, e, s, m, lat, c, cum,
        n``; level 0 eval, 1 service, 2 model), keeps only the buckets holding
        a nearest-rank p50 or p95.
    """
    return _windows_sql(hist), _PICKS
