"""``evals.json`` and the per-target totals in one pass over the results.

One ``GROUP BY`` (the only sort of the rows) builds a histogram keyed by
eval, service, model, whole-millisecond latency, status and failure
category, carrying every sum the reports need. From that histogram, inside
the same statement, SQLite returns the per-target sums (kind 0) and the
buckets that hold each level's nearest-rank p50/p95 (kind 1, via
:func:`evalhydra.reports.zig.percentile_buckets_sql`). Python only assembles
a few hundred rows.

The document equals the row-based reference (``tests/reference/zig.py``) over the rows in
zig_eval's run order: evals and services sorted, a service's models in the
order of their first (run_index, case_id).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from evalhydra.analysis.aggregate import CATEGORY_KEY_SQL, Target, TargetAgg
from evalhydra.analysis.selection import DURATION_SQL, PASSED_SQL, STATUS_SQL, Selection
from evalhydra.analysis.zigstats import SCHEMA_VERSION, LevelStats, percentile_buckets_sql
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["Totals", "evals_and_targets"]

#: ``evals.json`` and the per-target totals of one selection (:func:`evals_and_targets`).
Totals = tuple[dict[str, Any], dict[Target, TargetAgg]]

_LAT = "max(0, cast(coalesce(latency_ms, 0) + 0.5 as integer))"
_SUMS = ("c", "passed", "latency_sum", "retried_runs", "total_attempts", "errors", "duration",
         "tin", "tout", "gen", "evl", "score", "attempts", "think", "streamed", "hits", "last")

# The GROUP BY leads with its most varied key, the whole-millisecond latency: SQLite's sorter
# settles a comparison on an integer first key without decoding the rest of the record
# (bench/report_scale.py).
_HIST = f"""select "group" as g, eval_id as e, service_name as s, model as m, {_LAT} as lat,
  {STATUS_SQL} as st, {CATEGORY_KEY_SQL} as cat, count(*) as c, sum({PASSED_SQL}) as passed,
  sum(case when retried then 1 else 0 end) as retried_runs,
  sum(coalesce(attempt_count, 0)) as total_attempts,
  sum({INFRA_ERROR_SQL}) as errors,
  sum({DURATION_SQL}) as duration,
  sum(coalesce(prompt_tokens, 0) + coalesce(judge_prompt_tokens, 0)) as tin,
  sum(coalesce(completion_tokens, 0) + coalesce(judge_completion_tokens, 0)) as tout,
  sum(coalesce(cost_usd, 0.0)) as gen, sum(coalesce(judge_cost_usd, 0.0)) as evl,
  sum(min(1.0, max(0.0, coalesce(score, 0.0)))) as score,
  sum(max(1, coalesce(attempts, 1))) as attempts, sum(coalesce(reasoning_tokens, 0)) as think,
  count(ttft_ms) as streamed, sum(coalesce(cached, 0)) as hits, max(evaluated_at) as last
from {{table}} where {{where}} group by lat, st, cat, g, e, s, m"""


def _sql(table: str, where: str) -> str:
    ctes, picks = percentile_buckets_sql("lat_hist")
    sums = ", ".join(f"sum({name})" if name != "last" else "max(last)" for name in _SUMS)
    sums = sums.replace("sum(latency_sum)", "sum(lat * c)")
    blanks = ", ".join("null" for _ in _SUMS[1:])
    return f"""
        with hist as materialized ({_HIST.format(table=table, where=where)}),
        lat_hist as (select g, e, s, m, lat, sum(c) as c from hist group by g, e, s, m, lat),
        {ctes}
        select 0 as kind, g, e, s, m, st, cat, {sums}, null, null, null, null from hist
          group by g, e, s, m, st, cat
        union all
        select 1, g, e, s, m, null, null, n, {blanks}, lvl, lat, c, cum
          from cumulative where {picks}"""


def _add_target(targets: dict[Target, TargetAgg], key: Target, st: str, cat: str | None,
                sums: dict[str, Any]) -> None:
    t = targets.setdefault(key, TargetAgg(key))
    t.n += sums["c"]
    t.passed += sums["passed"]
    t.errors += sums["errors"]
    t.statuses[st] += sums["c"]
    if cat is not None:
        t.categories[cat] += sums["c"] - sums["passed"]
    t.duration += sums["duration"]
    t.input_tokens += sums["tin"]
    t.output_tokens += sums["tout"]
    t.generation_usd += sums["gen"]
    t.evaluation_usd += sums["evl"]
    t.score += sums["score"]
    t.attempts += sums["attempts"]
    t.reasoning_tokens += sums["think"]
    t.streamed += sums["streamed"]
    t.cached += sums["hits"]
    t.last_evaluated = max(t.last_evaluated, sums["last"] or "")


def _rank(p: int, n: int) -> int:
    return min(n, (p * n + 99) // 100)


class _Tree:
    """Per-level accumulators keyed like zig.py's percentile levels."""

    def __init__(self) -> None:
        self.levels: dict[tuple[Any, ...], LevelStats] = {}
        self.models: dict[tuple[str, str, str], list[Any]] = {}

    def add(self, g: str, e: str, s: str, m: Any, sums: dict[str, Any]) -> None:
        for key in ((0, g, e, None, None), (1, g, e, s, None), (2, g, e, s, m)):
            self.levels.setdefault(key, LevelStats()).add(sums, "c")
        models = self.models.setdefault((g, e, s), [])
        if m not in models:
            models.append(m)

    def bucket(self, row: tuple[Any, ...]) -> None:
        g, e, s, m, n = row[1:5] + (row[7],)
        lvl, lat, c, cum = row[-4:]
        level = self.levels[(lvl, g, e, s, m)]
        if cum - c < _rank(50, n) <= cum:
            level.p50 = lat
        if cum - c < _rank(95, n) <= cum:
            level.p95 = lat


def _fold(rows: Iterable[tuple[Any, ...]]) -> tuple[_Tree, dict[Target, TargetAgg]]:
    tree = _Tree()
    targets: dict[Target, TargetAgg] = {}
    buckets = []
    for row in rows:
        if row[0] == 1:
            buckets.append(row)
            continue
        g, e, s, m, st, cat = row[1:7]
        sums = dict(zip(_SUMS, row[7:7 + len(_SUMS)], strict=True))
        tree.add(g, e, s, m, sums)
        _add_target(targets, (g, e, s, m or ""), st, cat, sums)
    for row in buckets:
        tree.bucket(row)
    return tree, targets


def _first_seen(conn: sqlite3.Connection, sel: Selection, where: tuple[str, str, str],
                model: Any) -> tuple[int, str, str]:
    """A model's first (run_index, case_id) in zig_eval's run order."""
    cond = '"group" = ? and eval_id = ? and service_name = ? and model is ?'
    params = (*sel.params, *where, model)
    first = conn.execute(sel.source("min(run_index)", cond), params).fetchone()[0]
    case = conn.execute(sel.source("min(case_id)", cond + " and run_index = ?"),
                        (*params, first)).fetchone()[0]
    return (int(first), str(case), str(model or ""))


def _text_key(value: Any) -> Any:
    """Sort key that tolerates NULLs (SQLite sorts them first, as here)."""
    if isinstance(value, tuple):
        return tuple(_text_key(v) for v in value)
    return (value is not None, "" if value is None else str(value))


def _document(conn: sqlite3.Connection, sel: Selection, tree: _Tree) -> dict[str, Any]:
    evals = []
    for g, e in sorted((k[1:3] for k in tree.levels if k[0] == 0), key=_text_key):
        services = []
        for s in sorted((k[3] for k in tree.levels if k[0] == 1 and k[1:3] == (g, e)), key=_text_key):
            models = tree.models[(g, e, s)]
            if len(models) > 1:
                order = {m: _first_seen(conn, sel, (g, e, s), m) for m in models}
                models = sorted(models, key=order.__getitem__)
            services.append({
                "service_name": s, "stats": tree.levels[(1, g, e, s, None)].stats(),
                "models": [{"model": m, "stats": tree.levels[(2, g, e, s, m)].stats()}
                           for m in models]})
        evals.append({"group": g, "eval_id": e, "stats": tree.levels[(0, g, e, None, None)].stats(),
                      "services": services})
    return {"schema_version": SCHEMA_VERSION, "evals": evals}


def evals_and_targets(conn: sqlite3.Connection, sel: Selection) -> Totals:
    """``evals.json`` and the per eval × service × model totals of a selection.

    Args:
        conn: A connection to the store.
        sel: The results covered.

    Returns:
        ``(evals_doc, targets)``; target keys use ``""`` for a missing model.
    """
    tree, targets = _fold(conn.execute(_sql(sel.table, sel.where), sel.params))
    return _document(conn, sel, tree), targets
