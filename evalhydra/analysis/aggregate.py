"""Everything report.md, trials.json and the CI gates need, aggregated in SQL.

One ``GROUP BY eval, case, service, model`` pass reduces the selected results
to one row per (target, case), and SQLite summarises those rows in the same
statement: the pass@k histograms, the stability verdicts and the capped case
tables arrive as a few hundred rows. Per-trial sections read at most
:data:`CAP_TRIALS` rows with ``ORDER BY … LIMIT``.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalhydra.analysis.selection import (
    DURATION_SQL,
    PASSED_SQL,
    STATUS_SQL,
    TRIAL_ORDER_SQL,
    Selection,
)
from evalhydra.core import strictjson
from evalhydra.core.values import PASSING
from evalhydra.stats.rates import pass_at_k, pass_hat_k
from evalhydra.store.fractions import fractions_valid
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = [
    "CAP_CASES",
    "CATEGORY_KEY_SQL",
    "CAP_FLAKY",
    "CAP_FLAKY_JSON",
    "CAP_GRID",
    "CAP_TRIALS",
    "MAX_K",
    "CaseData",
    "TargetAgg",
    "CaseViews",
    "case_histograms",
    "case_views",
    "case_rows",
    "collect_cases",
    "run_histograms",
    "CAP_FAILING_CASES",
    "FAILING_SQL",
    "failing_rows",
    "pass_k_table",
    "trial_rows",
]

CAP_TRIALS = 200  # per-trial rows in report.md (Failing, Summary, Per-Trial Details)
CAP_CASES = 200  # rows of By Test Case and Stability
CAP_GRID = 30  # case columns of the Grid
CAP_FLAKY = 20  # flaky cases listed per report.md
CAP_FLAKY_JSON = 1000  # flaky cases per target in trials.json
MAX_K = 5  # pass@k and pass^k for k = 1..min(trials, MAX_K)
CATEGORIES = ("format", "content", "hallucination", "missing_field", "constraint_violation", "other")
_ENUM = ", ".join(f"'{c}'" for c in CATEGORIES)

Target = tuple[str, str, str, str]  # group, eval_id, service_name, model


@dataclass
class TargetAgg:
    """Totals of one eval × service × model (or any group of results)."""

    key: Target
    n: int = 0
    passed: int = 0
    errors: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    categories: Counter[str] = field(default_factory=Counter)  # failures per category
    duration: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0  # of output_tokens, those a reasoning model spent thinking
    streamed: int = 0  # results with a time to first token (streamed answers)
    cached: int = 0  # results answered from the response cache
    generation_usd: float = 0.0
    evaluation_usd: float = 0.0
    score: float = 0.0
    attempts: int = 0
    last_evaluated: str = ""
    cases: int = 0
    # (trials without an infrastructure error, passed) → cases; verdicts over the same trials
    hist: Counter[tuple[int, int]] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)

    @property
    def cost_usd(self) -> float:
        """Generation plus evaluation cost."""
        return self.generation_usd + self.evaluation_usd

    def merge(self, other: TargetAgg) -> None:
        """Add another group's totals (not its per-case data)."""
        for name in ("n", "passed", "errors", "duration", "input_tokens", "output_tokens", "reasoning_tokens",
                     "streamed", "cached", "generation_usd", "evaluation_usd", "score", "attempts", "cases"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.statuses.update(other.statuses)
        self.categories.update(other.categories)
        self.last_evaluated = max(self.last_evaluated, other.last_evaluated)


@dataclass
class CaseData:
    """Aggregates of one selection (see :func:`collect_cases`)."""

    targets: dict[Target, TargetAgg] = field(default_factory=dict)
    cases_total: int = 0
    first_keys: list[tuple[str, str]] = field(default_factory=list)  # first CAP_CASES, sorted
    by_case: list[tuple[tuple[str, str], TargetAgg]] = field(default_factory=list)
    stability: list[tuple[str, str, str, str, int, int]] = field(default_factory=list)
    stability_total: int = 0
    flaky: list[tuple[float, str, str, str, str, int, int]] = field(default_factory=list)
    flaky_by_target: dict[Target, list[tuple[float, str, int, int]]] = field(default_factory=dict)
    max_trials: int = 0

    def overall(self) -> TargetAgg:
        """Totals over every target."""
        total = TargetAgg(("", "", "", ""))
        for t in self.targets.values():
            total.merge(t)
        return total

    def by_label(self) -> dict[tuple[str, str], TargetAgg]:
        """Totals per (service, model), sorted."""
        out: dict[tuple[str, str], TargetAgg] = {}
        for key, t in sorted(self.targets.items(), key=lambda kv: kv[0][2:]):
            out.setdefault(key[2:], TargetAgg(("", "", *key[2:]))).merge(t)
        return out

    @property
    def total(self) -> int:
        """Results selected."""
        return sum(t.n for t in self.targets.values())


CATEGORY_KEY_SQL = (
    f"(case when {PASSED_SQL} then null when failure_category in ({_ENUM}) then failure_category"
    f" when failure_category is not null then 'other' when {INFRA_ERROR_SQL} then 'error'"
    " else 'uncategorized' end)"
)

#: One row per (target, case): its results, passes and scored (not infrastructure-error) trials.
_CASES_CTE = f"""cases as materialized (
  select max("group") as g, eval_id as e, service_name as s, coalesce(model, '') as m,
    case_id as c, count(*) as n, sum({PASSED_SQL}) as ok, count(*) - sum({INFRA_ERROR_SQL}) as scored
  from {{table}} where {{where}}
  group by eval_id, case_id, service_name, model)"""

#: The same per-case rows from a finished run's saved fractions (:mod:`evalhydra.store.fractions`):
#: one row per case to read instead of one per result.
_SAVED_CASES_CTE = """cases as materialized (
  select max("group") as g, eval_id as e, service_name as s, coalesce(model, '') as m,
    case_id as c, sum(results) as n, sum(passed) as ok, sum(scored) as scored
  from case_fractions where run_id = ?
  group by eval_id, case_id, service_name, model)"""

_HISTOGRAM_SQL = f"""with {_CASES_CTE}
select g, e, s, m, scored, ok, count(*) from cases where scored > 0 group by g, e, s, m, scored, ok"""

_CASES_SQL = f"""
with {_CASES_CTE},
flaky as materialized (
  select g, e, s, m, c, ok, scored, 2.0 * min(ok, scored - ok) / scored as f
  from cases where ok > 0 and ok < scored)
select 0 as kind, g, e, s, m, null as c, scored, ok, count(*) as n, null as f
  from cases group by g, e, s, m, scored, ok
union all
select 1, null, null, null, null, null, (select count(*) from (select distinct e, c from cases)),
  max(n), count(*), null from cases
union all
select * from (select distinct 2, null, e, null, null, c, null, null, null, null from cases
  order by e, c limit {{cap_cases}})
union all
select * from (select 3, null, e, s, m, c, ok, null, n, null from cases
  order by s, m, e, c limit {{cap_cases}})
union all
select * from (select 4, null, e, s, m, c, ok, scored, null, f from flaky
  order by f desc, s, m, e, c limit {{cap_flaky}})
union all
select 5, g, e, s, m, c, ok, scored, null, f from (
  select *, row_number() over (partition by g, e, s, m order by f desc, c) as rank from flaky)
  where rank <= {{cap_flaky_json}}
"""

_SAVED_CASES_SQL = _CASES_SQL.replace(_CASES_CTE, _SAVED_CASES_CTE)


def _verdict(passed: int, total: int) -> str:
    return "STABLE" if passed == total else "BROKEN" if passed == 0 else "FLAKY"


def _add_histogram(targets: dict[Target, TargetAgg], row: tuple[Any, ...]) -> None:
    """One (target, scored trials, passed) count of cases: pass@k inputs and verdicts."""
    g, e, s, m, _, scored, ok, cases = row[1:9]
    target = targets[(g, e, s, m)]
    target.cases += cases
    if scored:
        target.hist[(scored, ok)] += cases
        target.verdicts[_verdict(ok, scored)] += cases
    else:
        target.verdicts["NO RESULT"] += cases


def _fold_cases(data: CaseData, rows: list[tuple[Any, ...]]) -> CaseData:
    """Sort the statement's rows into ``data`` (each part is small: see :func:`collect_cases`)."""
    by_kind: dict[int, list[tuple[Any, ...]]] = {k: [] for k in range(6)}
    for row in rows:
        by_kind[row[0]].append(row)
    for row in sorted(by_kind[0], key=lambda r: r[1:8]):
        _add_histogram(data.targets, row)
    for _, _, _, _, _, _, cases, trials, rows_total, _ in by_kind[1]:
        data.cases_total, data.max_trials, data.stability_total = cases, trials or 0, rows_total
    data.first_keys = sorted((r[2], r[5]) for r in by_kind[2])
    data.stability = sorted((r[3], r[4], r[2], r[5], r[6], r[8]) for r in by_kind[3])
    data.flaky = sorted(((r[9], r[3], r[4], r[2], r[5], r[6], r[7]) for r in by_kind[4]),
                        key=lambda r: (-r[0], *r[1:5]))
    per_target: dict[Target, list[tuple[float, str, int, int]]] = {}
    for r in sorted(by_kind[5], key=lambda r: (r[1:5], -r[9], r[5])):
        per_target.setdefault((r[1], r[2], r[3], r[4]), []).append((r[9], r[5], r[6], r[7]))
    data.flaky_by_target = per_target
    return data


def case_rows(conn: sqlite3.Connection, sel: Selection) -> list[tuple[Any, ...]]:
    """The rows of :func:`collect_cases`'s statement (a query of its own, to run in parallel).

    A finished run's saved per-case fractions stand for its results when they still describe
    it (:func:`~evalhydra.store.fractions.fractions_valid`): the same counts, a row per case.
    """
    caps = {"cap_cases": CAP_CASES, "cap_flaky": CAP_FLAKY, "cap_flaky_json": CAP_FLAKY_JSON}
    if len(sel.run_ids) == 1 and fractions_valid(conn, sel.run_ids[0]):
        return conn.execute(_SAVED_CASES_SQL.format(**caps), sel.run_ids).fetchall()
    sql = _CASES_SQL.format(table=sel.table, where=sel.where, **caps)
    return conn.execute(sql, sel.params).fetchall()


def case_histograms(conn: sqlite3.Connection, sel: Selection) -> dict[Target, Counter[tuple[int, int]]]:
    """Per target, how many cases had each (scored trials, passed trials) count.

    What the case-clustered pass-rate intervals need (:mod:`evalhydra.stats.clustered`),
    in one small query; cases with no scored trial are left out.
    """
    out: dict[Target, Counter[tuple[int, int]]] = {}
    for g, e, s, m, scored, ok, cases in conn.execute(
            _HISTOGRAM_SQL.format(table=sel.table, where=sel.where), sel.params):
        out.setdefault((g, e, s, m), Counter())[(scored, ok)] += cases
    return out


def run_histograms(conn: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, Counter[tuple[int, int]]]:
    """Per run, the (scored trials, passed trials) histogram of its (target, case) clusters.

    A finished run's saved per-case fractions give it when they still describe the run, a row
    per case read instead of a grouping of every result.
    """
    out: dict[str, Counter[tuple[int, int]]] = {}
    rest = []
    for run_id in dict.fromkeys(run_ids):
        if not fractions_valid(conn, run_id):
            rest.append(run_id)
            continue
        for scored, ok, cases in conn.execute(_SAVED_RUN_HISTOGRAM_SQL, [run_id]):
            out.setdefault(run_id, Counter())[(scored, ok)] += cases
    if rest:
        marks = ", ".join("?" * len(rest))
        for run_id, scored, ok, cases in conn.execute(_RUN_HISTOGRAM_SQL.format(marks=marks), rest):
            out.setdefault(run_id, Counter())[(scored, ok)] += cases
    return out


_RUN_HISTOGRAM_SQL = f"""select run_id, scored, ok, count(*) from (
    select rc.run_id as run_id, sum({PASSED_SQL}) as ok,
      count(*) - sum({INFRA_ERROR_SQL}) as scored
    from run_cells rc join results r on r.cell_key = rc.cell_key
      and r.run_id = rc.result_run_id where rc.run_id in ({{marks}})
    group by rc.run_id, r.eval_id, r.case_id, r.service_name, r.model)
  where scored > 0 group by run_id, scored, ok"""

_SAVED_RUN_HISTOGRAM_SQL = """select scored, ok, count(*) from (
    select sum(passed) as ok, sum(scored) as scored from case_fractions where run_id = ?
    group by eval_id, case_id, service_name, model)
  where scored > 0 group by scored, ok"""


def collect_cases(conn: sqlite3.Connection, sel: Selection, targets: dict[Target, TargetAgg],
                  rows: list[tuple[Any, ...]] | None = None) -> CaseData:
    """Per-case statistics, folded into ``targets``, in one statement.

    SQLite reduces the selection to one row per (case, target), keeps that in
    a temporary table, and returns only small summaries of it: per target, how
    many cases had each (scored trials, passed) count (pass@k and the
    stability verdicts); the number of cases; the first :data:`CAP_CASES`
    cases and (target, case) cells; and the flakiest cells overall and per
    target. No Python loop sees a row per case.

    Args:
        conn: A connection to the store.
        sel: The results covered.
        targets: Their per-target totals (see :mod:`evalhydra.analysis.evalstats`).
        rows: The statement's rows, if :func:`case_rows` already returned them.

    Returns:
        The folded :class:`CaseData`; ``by_case`` stays empty (see :func:`case_views`).
    """
    return _fold_cases(CaseData(targets=targets), case_rows(conn, sel) if rows is None else rows)


def pass_k_table(agg: TargetAgg) -> tuple[list[int], dict[int, float], dict[int, float]]:
    """pass@k and pass^k (unbiased; mean over cases) for k = 1..min(trials, MAX_K).

    Returns:
        ``(ks, pass_at, pass_hat)``; ``ks`` is empty when the target has no cases.
    """
    if not agg.hist:
        return [], {}, {}
    k_max = min(MAX_K, min(n for n, _ in agg.hist))
    ks = list(range(1, k_max + 1))
    cases = sum(agg.hist.values())
    at = {k: sum(w * pass_at_k(n, c, k) for (n, c), w in agg.hist.items()) / cases for k in ks}
    hat = {k: sum(w * pass_hat_k(n, c, k) for (n, c), w in agg.hist.items()) / cases for k in ks}
    return ks, at, hat


# --- per-trial rows ------------------------------------------------------------

_TRIAL_COLUMNS = f"""eval_id, service_name, coalesce(model, '') as model, case_id, run_index,
  kind, {STATUS_SQL} as status, {PASSED_SQL} as passed, {DURATION_SQL} as duration, score,
  coalesce(prompt_tokens, 0) as input_tokens, coalesce(completion_tokens, 0) as output_tokens,
  coalesce(cached_tokens, 0) as cache_read_tokens, tool_calls, exit_code, log_path,
  stdout_log_path, details, input, ideal, output, failure_reason, error_kind, feedback,
  failure_category, suggested_fix, latency_ms, attempts, reply_model"""


def trial_rows(conn: sqlite3.Connection, sel: Selection, *, extra: str = "",
               extra_params: Sequence[Any] = (), limit: int | None = None) -> list[dict[str, Any]]:
    """The first ``limit`` trials in zrb order (service, model, eval, case, trial).

    Args:
        conn: A connection to the store.
        sel: The results covered.
        extra: Further SQL condition (e.g. :data:`FAILING_SQL`).
        extra_params: Its parameters.
        limit: Most rows returned (default: :data:`CAP_TRIALS`).

    Returns:
        Row dicts with ``tool_calls`` and ``details`` decoded from JSON and
        ``tool_names`` added.
    """
    sql = sel.ordered(_TRIAL_COLUMNS, TRIAL_ORDER_SQL, extra=extra, limit=True)
    cursor = conn.execute(sql, (*sel.params, *extra_params, CAP_TRIALS if limit is None else limit))
    names = [d[0] for d in cursor.description]
    return [_decode(dict(zip(names, row, strict=True))) for row in cursor]


def _json(text: Any) -> Any:
    return strictjson.stored(text)


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    calls = _json(row["tool_calls"]) or []
    row["tool_names"] = [c.get("name", "") if isinstance(c, dict) else str(c) for c in calls]
    row["details"] = _json(row["details"])
    return row


FAILING_SQL = f"{STATUS_SQL} in ('FAIL', 'TIMEOUT', 'ERROR')"
#: Most failing test cases report.md lists (each with its first failing trial).
CAP_FAILING_CASES = 10_000


def failing_rows(conn: sqlite3.Connection, sel: Selection) -> list[dict[str, Any]]:
    """The failing trials report.md lists, in zrb order: the first :data:`CAP_TRIALS`, and the
    first failing trial of every failing (target, test case) beyond them, so the Failing / Timeout
    table names every test case zrb's does (up to :data:`CAP_FAILING_CASES` cases)."""
    first = trial_rows(conn, sel, extra=FAILING_SQL)
    if len(first) < CAP_TRIALS:
        return first  # every failing trial: nothing is left out
    per_case = (f"{FAILING_SQL} and rowid in (select rid from (select rowid as rid, min(run_index)"
                f" from {sel.table} where ({sel.where}) and {FAILING_SQL}"
                " group by service_name, model, eval_id, case_id))")
    rows = {_trial_key(r): r for r in trial_rows(conn, sel, extra=per_case, extra_params=sel.params,
                                                  limit=CAP_FAILING_CASES)}
    rows.update({_trial_key(r): r for r in first})
    return [rows[key] for key in sorted(rows)]


def _trial_key(row: dict[str, Any]) -> tuple[str, str, str, str, int]:
    return (row["service_name"], row["model"], row["eval_id"], row["case_id"], int(row["run_index"]))


def _pairs_in(keys: Sequence[tuple[str, str]]) -> tuple[str, list[str]]:
    marks = ", ".join("(?, ?)" for _ in keys)
    return f"(eval_id, case_id) in (values {marks})", [v for key in keys for v in key]


@dataclass
class CaseViews:
    """Per-case details of a few (eval, case) keys (see :func:`case_views`)."""

    by_case: list[tuple[tuple[str, str], TargetAgg]]
    grid: dict[tuple[str, str, str, str], list[str]]
    bests: dict[tuple[str, str], dict[str, Any]]


def _best(best: dict[str, Any] | None, row: tuple[Any, ...]) -> dict[str, Any]:
    duration, score, tokens, calls = row[5:9]
    if best is None:
        return {"duration": duration, "score": score, "total_tokens": tokens, "tool_call_count": calls}
    score = score if best["score"] is None else best["score"] if score is None else max(score, best["score"])
    return {"duration": min(duration, best["duration"]), "score": score,
            "total_tokens": min(tokens, best["total_tokens"]),
            "tool_call_count": min(calls, best["tool_call_count"])}


def case_views(conn: sqlite3.Connection, sel: Selection, by_case: Sequence[tuple[str, str]],
               grid: Sequence[tuple[str, str]], bests: Sequence[tuple[str, str]]) -> CaseViews:
    """One query over the trials of a few cases: status counts per case (``by_case``),
    each target's statuses in trial order (``grid``), and the best duration, score,
    tokens and tool calls among passing trials (``bests``, zrb's bold values)."""
    keys = sorted({*by_case, *grid, *bests})
    if not keys:
        return CaseViews([], {}, {})
    cond, params = _pairs_in(keys)
    sql = (f"select service_name, coalesce(model, ''), eval_id, case_id, {STATUS_SQL},"
           f" {DURATION_SQL}, score, coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0),"
           " case when json_valid(tool_calls) then json_array_length(tool_calls) else 0 end"
           f" from ({sel.source('*', cond)}) order by {TRIAL_ORDER_SQL}")
    counts = {key: TargetAgg(("", key[0], "", key[1])) for key in by_case}
    icons: dict[tuple[str, str, str, str], list[str]] = {}
    best: dict[tuple[str, str], dict[str, Any]] = {}
    wanted_grid, wanted_best = set(grid), set(bests)
    for row in conn.execute(sql, (*sel.params, *params)):
        s, m, e, c, status = row[:5]
        if (e, c) in counts:
            counts[(e, c)].n += 1
            counts[(e, c)].statuses[status] += 1
        if (e, c) in wanted_grid:
            icons.setdefault((s, m, e, c), []).append(status)
        if (e, c) in wanted_best and status in PASSING:
            best[(e, c)] = _best(best.get((e, c)), row)
    return CaseViews(list(counts.items()), icons, best)
