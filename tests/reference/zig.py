"""Reference implementations (tests only): zig_eval's artifacts built from result rows in Python.

The shipped reports compute the same documents in SQL (:mod:`evalhydra.analysis.evalstats`,
:mod:`evalhydra.reports.streams`, :mod:`evalhydra.analysis.compare`); tests check they agree
byte for byte.
"""

from __future__ import annotations

import math
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Generic, Protocol, TypeVar

from evalhydra.analysis.zigstats import (
    _LAT_SQL,
    _PICKS,
    CONFIDENCE_LEVEL,
    SCHEMA_VERSION,
    LevelStats,
    PairKey,
    Row,
    _windows_sql,
    stats_object,
)
from evalhydra.reports.zig import format_text_report
from evalhydra.stats.clustered import CaseDiffs, paired_difference
from evalhydra.stats.rates import delta_interval, mcnemar_exact_p, nearest_rank, wilson_interval
from evalhydra.store.rows import is_infra_error

__all__ = [
    "baseline_comparisons",
    "compute_stats",
    "evals_json",
    "evals_json_sql",
    "latency_ms_int",
    "run_result_json",
    "runs_json",
    "text_report",
]


def latency_ms_int(value: Any) -> int:
    """Whole milliseconds, rounded half up; None (NULL) and negatives give 0."""
    if value is None:
        return 0
    return max(0, math.floor(float(value) + 0.5))


def _opt(value: Any, cast: Callable[[Any], Any]) -> Any:
    return None if value is None else cast(value)


def run_result_json(row: Row) -> dict[str, Any]:
    """The seed's RunResult object for one row, keys in the seed's order.

    Nullable seed fields (``failure_reason``, ``status_code``,
    ``judge_status_code``) keep an explicit null; ``judge_retried`` is false when
    no judge ran, as in the seed. Other fields are coerced to the seed's types:
    ``passed``/``retried`` to bool, ``score`` to float, counts to int,
    ``latency_ms`` to whole milliseconds.

    Args:
        row: A ``results`` row.

    Returns:
        A dict ready for ``json.dumps``.
    """
    return {
        "group": row["group"],
        "eval_id": row["eval_id"],
        "service_name": row["service_name"],
        "model": row.get("reply_model") or row["model"],
        "run_index": int(row["run_index"]),
        "case_id": row["case_id"],
        "output": row["output"],
        "passed": bool(row["passed"]),
        "score": float(row["score"] or 0.0),
        "failure_reason": row["failure_reason"],
        "status_code": _opt(row["status_code"], int),
        "attempt_count": int(row["attempt_count"] or 0),
        "retried": bool(row["retried"]),
        "judge_attempt_count": int(row["judge_attempt_count"] or 0),
        "judge_retried": bool(row["judge_retried"]),
        "judge_status_code": _opt(row["judge_status_code"], int),
        "latency_ms": latency_ms_int(row["latency_ms"]),
    }


def _run_sort_key(row: Row) -> tuple[str, str, str, int, str, str]:
    return (
        str(row["group"]),
        str(row["eval_id"]),
        str(row["service_name"]),
        int(row["run_index"]),
        str(row["case_id"]),
        str(row["model"] or ""),
    )


def runs_json(rows: Iterable[Row]) -> dict[str, Any]:
    """``{schema_version: 2, runs: [...]}``, sorted by (group, eval_id,
    service_name, run_index, case_id, model) as zig_eval's runner sorts."""
    ordered = sorted(rows, key=_run_sort_key)
    return {"schema_version": SCHEMA_VERSION, "runs": [run_result_json(r) for r in ordered]}


@dataclass
class _StatsAcc:
    """Running totals for one eval, service or model."""

    total: int = 0
    passed: int = 0
    retried_runs: int = 0
    total_attempts: int = 0
    latencies: list[int] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.total += 1
        self.passed += bool(row["passed"])
        self.retried_runs += bool(row["retried"])
        self.total_attempts += int(row["attempt_count"] or 0)
        self.latencies.append(latency_ms_int(row["latency_ms"]))

    def merge(self, other: _StatsAcc) -> None:
        self.total += other.total
        self.passed += other.passed
        self.retried_runs += other.retried_runs
        self.total_attempts += other.total_attempts
        self.latencies += other.latencies

    def stats(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        mean = sum(ordered) / len(ordered) if ordered else 0.0
        return stats_object(
            self.total,
            self.passed,
            mean,
            nearest_rank(ordered, 50),
            nearest_rank(ordered, 95),
            self.retried_runs,
            self.total_attempts,
        )


def compute_stats(rows: Iterable[Row]) -> dict[str, Any]:
    """The seed's stats object over ``rows`` (zeros when empty)."""
    acc = _StatsAcc()
    for row in rows:
        acc.add(row)
    return acc.stats()


class _Adder(Protocol):
    def add(self, row: Row) -> None: ...


A = TypeVar("A", bound=_Adder)


@dataclass
class _Node(Generic[A]):
    """An accumulator plus its children (services of an eval, models of a service)."""

    acc: A
    children: dict[Any, _Node[A]] = field(default_factory=dict)


def _child(node: _Node[A], key: Any, factory: Callable[[], A]) -> _Node[A]:
    child = node.children.get(key)
    if child is None:
        child = node.children[key] = _Node(factory())
    return child


def _build_tree(rows: Iterable[Row], factory: Callable[[], A], *, leaves_only: bool = False) -> _Node[A]:
    """Root → (group, eval_id) → service_name → model, children in first-seen order.

    Every row is added to its eval, service and model accumulators, or only to
    the model's with ``leaves_only`` (the caller then rolls the totals up).
    """
    root: _Node[A] = _Node(factory())
    for row in rows:
        eval_node = _child(root, (row["group"], row["eval_id"]), factory)
        service_node = _child(eval_node, row["service_name"], factory)
        model_node = _child(service_node, row["model"], factory)
        model_node.acc.add(row)
        if not leaves_only:
            eval_node.acc.add(row)
            service_node.acc.add(row)
    return root


def _roll_up(node: _Node[_StatsAcc]) -> None:
    """Fill every inner accumulator from its children (post-order)."""
    for child in node.children.values():
        if child.children:
            _roll_up(child)
        node.acc.merge(child.acc)


def _evals_document(root: _Node[Any], stats_of: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    evals = []
    for (group, eval_id), eval_node in root.children.items():
        services = []
        for service_name, service_node in eval_node.children.items():
            models = [
                {"model": model, "stats": stats_of(model_node.acc)}
                for model, model_node in service_node.children.items()
            ]
            services.append(
                {
                    "service_name": service_name,
                    "stats": stats_of(service_node.acc),
                    "models": models,
                }
            )
        evals.append(
            {
                "group": group,
                "eval_id": eval_id,
                "stats": stats_of(eval_node.acc),
                "services": services,
            }
        )
    return {"schema_version": SCHEMA_VERSION, "evals": evals}


def evals_json(rows: Iterable[Row]) -> dict[str, Any]:
    """``{schema_version: 2, evals: [{group, eval_id, stats, services: [{service_name,
    stats, models: [{model, stats}]}]}]}``, grouped in first-seen order."""
    root = _build_tree(rows, _StatsAcc, leaves_only=True)
    _roll_up(root)
    return _evals_document(root, _StatsAcc.stats)


def _source_sql(table: str, where: str, order_by: str) -> str:
    clause = f"WHERE {where}" if where.strip() else ""
    return (
        f'SELECT "group" AS g, eval_id AS e, service_name AS s, model AS m, passed, retried,'
        f" attempt_count, {_LAT_SQL} AS lat, {order_by} AS ord FROM {table} {clause}"
    )


def _aggregate_sql(source: str) -> str:
    return (
        f"SELECT g, e, s, m, COUNT(*) AS n,"
        f" SUM(CASE WHEN passed THEN 1 ELSE 0 END) AS passed,"
        f" SUM(lat) AS latency_sum,"
        f" SUM(CASE WHEN retried THEN 1 ELSE 0 END) AS retried_runs,"
        f" SUM(COALESCE(attempt_count, 0)) AS total_attempts,"
        f" MIN(ord) AS first_seen"
        f" FROM ({source}) GROUP BY g, e, s, m ORDER BY first_seen"
    )


def _percentile_sql(source: str) -> str:
    """Rows holding the p50/p95 latency of every eval, service and model.

    Latencies are whole milliseconds, so the rows first collapse into a
    histogram ``(g, e, s, m, lat) → c``; each level (0 eval, 1 service,
    2 model) then takes a running ``SUM(c)`` window over its partition, and a
    bucket holds nearest rank ``r`` when ``cum − c < r <= cum``.
    """
    return f"""
        WITH hist AS (SELECT g, e, s, m, lat, COUNT(*) AS c FROM ({source})
                      GROUP BY g, e, s, m, lat),
        {_windows_sql("hist")}
        SELECT lvl, g, e, s, m, lat, c, cum, n FROM cumulative WHERE {_PICKS}"""


def _nearest_rank_1based(p: int, n: int) -> int:
    return min(n, (p * n + 99) // 100)


def _level_node(root: _Node[LevelStats], row: sqlite3.Row) -> _Node[LevelStats]:
    node = root.children[(row["g"], row["e"])]
    if row["lvl"] >= 1:
        node = node.children[row["s"]]
    if row["lvl"] == 2:
        node = node.children[row["m"]]
    return node


def _apply_percentiles(root: _Node[LevelStats], rows: Iterable[sqlite3.Row]) -> None:
    for row in rows:
        acc = _level_node(root, row).acc
        below, upto = row["cum"] - row["c"], row["cum"]
        if below < _nearest_rank_1based(50, row["n"]) <= upto:
            acc.p50 = row["lat"]
        if below < _nearest_rank_1based(95, row["n"]) <= upto:
            acc.p95 = row["lat"]


def _renamed(row: sqlite3.Row) -> dict[str, Any]:
    names = {"g": "group", "e": "eval_id", "s": "service_name", "m": "model"}
    return {names.get(key, key): row[key] for key in row.keys()}  # noqa: SIM118


def evals_json_sql(
    conn: sqlite3.Connection,
    where: str = "",
    params: Sequence[Any] | Mapping[str, Any] = (),
    *,
    table: str = "results",
    order_by: str = "rowid",
) -> dict[str, Any]:
    """:func:`evals_json` computed inside SQLite, for millions of rows.

    Counts and sums come from one ``GROUP BY``. p50/p95 come from a latency
    histogram with running-sum windows per level (see :func:`_percentile_sql`),
    which returns only the buckets at the nearest ranks. Python never holds
    more than a few rows per group.

    Args:
        conn: An open connection (its ``row_factory`` is left untouched).
        where: SQL condition on ``table`` without the ``WHERE`` ("" = all rows).
        params: Parameters for ``where``.
        table: The results table (trusted SQL identifier).
        order_by: Expression giving insertion order, which defines "first seen"
            (trusted SQL; ``rowid`` by default).

    Returns:
        The same document :func:`evals_json` returns for the same rows in
        ``order_by`` order.
    """
    source = _source_sql(table, where, order_by)
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row
    groups = [_renamed(row) for row in cursor.execute(_aggregate_sql(source), params)]
    root = _build_tree(groups, LevelStats)
    _apply_percentiles(root, cursor.execute(_percentile_sql(source), params))
    return _evals_document(root, LevelStats.stats)


def baseline_comparisons(
    rows: Iterable[Row],
    *,
    baseline_service: str | None,
    baseline_models: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The seed's baseline comparisons: services first, then models.

    Service rows (``target_kind "service"``, ``service_name`` null) compare
    every other service of an eval with ``baseline_service``; evals without it
    are skipped, and ``None`` skips service rows altogether. Model rows
    (``target_kind "model"``) compare every other model of a service with its
    baseline model: ``baseline_models[service]``, else the service's
    first-seen model; services without that model are skipped.

    Each row ends with evalhydra's ``paired`` block, after the seed's keys:
    the case-level paired difference over the cases both targets scored
    (:func:`evalhydra.stats.clustered.paired_difference`), the sorted case ids
    that regressed and improved, and the (case, trial) keys whose verdict
    flipped on the same output. It is null when the targets share no scored
    case, or when a (case, trial) key repeats inside one target (a service that
    ran several models cannot be paired case by case).

    Args:
        rows: ``results`` rows.
        baseline_service: Baseline service name, or None.
        baseline_models: Baseline model per service name.

    Returns:
        ``{schema_version: 2, baseline_comparisons: [...]}``.
    """
    root = _build_tree(rows, _Outcomes)
    items = _service_rows(root, baseline_service) if baseline_service is not None else []
    items += _model_rows(root, baseline_models or {})
    return {"schema_version": SCHEMA_VERSION, "baseline_comparisons": items}


def text_report(rows: Iterable[Row]) -> str:
    """zig_eval's text report for ``rows`` (see :func:`format_text_report`)."""
    return format_text_report(evals_json(rows))


@dataclass
class _Outcomes:
    """Pass counts, the scored outcomes of each case, and each (case, trial)'s output."""

    total: int = 0
    passed: int = 0
    by_key: dict[PairKey, bool] = field(default_factory=dict)
    by_case: dict[str, list[bool]] = field(default_factory=dict)  # scored trials only
    outputs: dict[PairKey, tuple[bool, Any]] = field(default_factory=dict)  # scored trials only
    ambiguous: bool = False  # a pair key occurred twice (e.g. several models)

    def add(self, row: Row) -> None:
        self.total += 1
        self.passed += bool(row["passed"])
        key = (str(row["case_id"]), int(row["run_index"]))
        self.ambiguous = self.ambiguous or key in self.by_key
        self.by_key[key] = bool(row["passed"])
        if not is_infra_error(row.get("error_kind"), row.get("status")):
            self.by_case.setdefault(key[0], []).append(bool(row["passed"]))
            self.outputs[key] = (bool(row["passed"]), row.get("output"))

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def _case_diffs(base: _Outcomes, cand: _Outcomes, cases: list[str]) -> CaseDiffs:
    """The per-case differences' sums, computed case by case."""
    fb = [sum(base.by_case[c]) / len(base.by_case[c]) for c in cases]
    fx = [sum(cand.by_case[c]) / len(cand.by_case[c]) for c in cases]
    kb = [len(base.by_case[c]) for c in cases]
    kx = [len(cand.by_case[c]) for c in cases]
    d = [x - b for b, x in zip(fb, fx, strict=True)]
    sides = list(zip(fb + fx, kb + kx, strict=True))
    return CaseDiffs(
        n_cases=len(cases), sum_d=math.fsum(d), sum_d2=math.fsum(v * v for v in d),
        trials_max=max(kb + kx), both=sum(b == 1 and x == 1 for b, x in zip(fb, fx, strict=True)),
        improved=sum(v > 0 for v in d), regressed=sum(v < 0 for v in d),
        neither=sum(b == 0 and x == 0 for b, x in zip(fb, fx, strict=True)), trials_min=min(kb + kx),
        within=math.fsum(f * (1 - f) * k / max(k - 1, 1) for f, k in sides),
        within_over_trials=math.fsum(f * (1 - f) / max(k - 1, 1) for f, k in sides),
        moves=dict(Counter(move for move in (
            Fraction(sum(cand.by_case[c]), len(cand.by_case[c]))
            - Fraction(sum(base.by_case[c]), len(base.by_case[c])) for c in cases) if move)))


def _paired_block(base: _Outcomes, cand: _Outcomes) -> dict[str, Any] | None:
    """evalhydra's case-level paired statistics, or None when the targets cannot be paired."""
    if base.ambiguous or cand.ambiguous:
        return None
    cases = sorted(base.by_case.keys() & cand.by_case.keys())
    if not cases:
        return None
    diffs = _case_diffs(base, cand, cases)
    result = paired_difference(diffs)
    assert result is not None
    rate = {c: (sum(base.by_case[c]) / len(base.by_case[c]), sum(cand.by_case[c]) / len(cand.by_case[c]))
            for c in cases}
    flips = [f"{c}#{i}" for c, i in sorted(base.outputs.keys() & cand.outputs.keys())
             if base.outputs[(c, i)][1] is not None and base.outputs[(c, i)][1] == cand.outputs[(c, i)][1]
             and base.outputs[(c, i)][0] != cand.outputs[(c, i)][0]]
    return {
        "n_cases": len(cases),
        "trials_max": diffs.trials_max,
        "difference": result.difference,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "method": result.method,
        "test": "exact one-sided sign-flip",
        "p_value": result.p_value,
        "p_holm": result.p_value,
        "min_p": 0.5 ** len(cases),
        "std_error": result.std_error,
        "mcnemar_p": (mcnemar_exact_p(diffs.regressed, diffs.improved) if diffs.trials_max <= 1
                      else None),
        "regressed": [c for c in cases if rate[c][1] < rate[c][0]],
        "improved": [c for c in cases if rate[c][1] > rate[c][0]],
        "judge_flips": flips,
        "verdict": (f"cannot reach p < 0.05 with {len(cases)} case{'s' if len(cases) != 1 else ''}"
                    if 0.5 ** len(cases) >= 0.05
                    else "no significant change" if result.p_value >= 0.05 or result.difference == 0
                    else "regression" if result.difference < 0 else "improvement"),
    }


@dataclass(frozen=True)
class _Target:
    group: str
    eval_id: str
    kind: str
    service_name: str | None


def _comparison(
    where: _Target, base_name: str, cand_name: str, base: _Outcomes, cand: _Outcomes
) -> dict[str, Any]:
    base_ci = wilson_interval(base.passed, base.total)
    cand_ci = wilson_interval(cand.passed, cand.total)
    low, high = delta_interval(*base_ci, *cand_ci, base.total, cand.total)
    return {
        "group": where.group,
        "eval_id": where.eval_id,
        "target_kind": where.kind,
        "service_name": where.service_name,
        "baseline_name": base_name,
        "candidate_name": cand_name,
        "baseline_pass_rate": base.rate,
        "candidate_pass_rate": cand.rate,
        "delta_pass_rate": cand.rate - base.rate,
        "delta_ci_low": low,
        "delta_ci_high": high,
        "confidence_level": CONFIDENCE_LEVEL,
        "paired": _paired_block(base, cand),
    }


def _against(where: _Target, children: dict[Any, _Node[_Outcomes]], baseline: str) -> list[dict[str, Any]]:
    """One comparison per sibling of ``baseline``; none if it is absent."""
    base = children.get(baseline)
    if base is None:
        return []
    return [
        _comparison(where, baseline, name, base.acc, node.acc)
        for name, node in children.items()
        if name != baseline
    ]


def _service_rows(root: _Node[_Outcomes], baseline_service: str) -> list[dict[str, Any]]:
    rows = []
    for (group, eval_id), eval_node in root.children.items():
        where = _Target(group, eval_id, "service", None)
        rows += _against(where, eval_node.children, baseline_service)
    return rows


def _model_rows(root: _Node[_Outcomes], baseline_models: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for (group, eval_id), eval_node in root.children.items():
        for service_name, service_node in eval_node.children.items():
            default = next(iter(service_node.children))
            baseline = baseline_models.get(service_name, default)
            where = _Target(group, eval_id, "model", service_name)
            rows += _against(where, service_node.children, baseline)
    return rows
