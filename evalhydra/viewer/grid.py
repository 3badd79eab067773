"""The grid of cases × targets, a page at a time, and one case whole: read with SQL, paged in SQLite.

A grid page is one statement that groups the selection's results per case
and target, keeps the cases the filter and the search select, sorts them and
returns :data:`GRID_PAGE` of them; a second one reads those cases' trials
(verdict, score and the start of each output). Nothing loads a run whole.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalhydra.analysis.selection import STATUS_SQL, Selection, select_runs
from evalhydra.core import strictjson
from evalhydra.core.values import PASSING
from evalhydra.matchers.composite import matcher_parts
from evalhydra.reports.html import log_tail, store_folder
from evalhydra.store.labels import output_sha256
from evalhydra.store.rows import INFRA_ERROR_SQL, infra_error_sql
from evalhydra.viewer.render import Rendered, render_dialogue, render_text, word_diff

__all__ = ["FILTERS", "GRID_PAGE", "SORTS", "CaseView", "GridPage", "case_view", "grid_keys", "grid_page",
           "neighbours",
           "previous_run", "side_by_side"]

#: Cases on one page of the grid.
GRID_PAGE = 50
#: Characters of an input or output shown in the grid (the case page shows them whole).
EXCERPT = 240
#: What the grid can keep (SQL over the per-case columns; ``regressions`` also joins the base run).
FILTERS = {
    "all": "1",
    "failures": "ok < n - err",
    "errors": "err > 0",
    "flaky": "flaky = 1",
    "differ": "lo < hi",
    "regressions": "base.rate is not null and per_case.rate < base.rate",
}
#: How the grid can be ordered.
SORTS = {"case": "per_case.e, per_case.c", "worst": "coalesce(per_case.rate, 2), per_case.e, per_case.c",
         "errors": "err desc, per_case.e, per_case.c"}

#: The cases in grid order after (or, descending, before) a key, a page of them, walking the
#: (eval, case) index from that key: a deep page costs what the first one does.
_KEYS_SQL = """select eval_id, case_id from results indexed by idx_results_eval_case
  where ({where}) and {bound} group by eval_id, case_id order by eval_id {order}, case_id {order}
  limit :limit offset :offset"""

_PAGE_SQL = f"""with per_target as (
  select eval_id as e, case_id as c, count(*) as n, sum(case when passed then 1 else 0 end) as ok,
    sum({INFRA_ERROR_SQL}) as err{{hit}}
  from {{table}} where {{where}} group by e, c, service_name, model),
per_case as (
  select e, c, sum(n) as n, sum(ok) as ok, sum(err) as err, max(hit) as hit,
    max(ok > 0 and ok < n - err) as flaky,
    min(1.0 * ok / nullif(n - err, 0)) as lo, max(1.0 * ok / nullif(n - err, 0)) as hi,
    1.0 * sum(ok) / nullif(sum(n - err), 0) as rate
  from per_target group by e, c)
select per_case.e, per_case.c from per_case {{join}}
where hit and ({{filter}}) order by {{sort}} limit :limit offset :offset"""

#: Whether a result matches the search (its case id, input or output contains it, in any case).
_HIT_SQL = """, max(instr(lower(case_id || char(10) || coalesce(input, '') || char(10)
    || coalesce(output, '')), lower(:q)) > 0) as hit"""

_BASE_JOIN = f"""left join (select eval_id as e, case_id as c,
    1.0 * sum(case when passed then 1 else 0 end) / nullif(count(*) - sum({INFRA_ERROR_SQL}), 0) as rate
  from results where {{where}} group by e, c) as base on base.e = per_case.e and base.c = per_case.c"""

_TRIALS_SQL = f"""select eval_id, case_id, service_name || '/' || coalesce(model, '') as t, run_index,
  {STATUS_SQL} as status, score, {INFRA_ERROR_SQL} as err, error_kind,
  substr(coalesce(output, ''), 1, {EXCERPT + 1}) as output, substr(coalesce(input, ''), 1, {EXCERPT + 1})
from results indexed by idx_results_eval_case
where ({{where}}) and (eval_id, case_id) in (values {{keys}}) order by eval_id, case_id, t, run_index"""


@dataclass
class GridPage:
    """One page of the grid: its cases (each with its targets' trials) and how it was asked for."""

    targets: list[str]
    cases: list[dict[str, Any]]
    page: int
    more: bool
    filter: str
    query: str
    sort: str
    base: str | None = None
    keyset: bool = False  # paged by key (``after``/``before``): ``first``/``last`` name its ends
    first: tuple[str, str] | None = None
    last: tuple[str, str] | None = None
    earlier: bool = False  # a page before this one exists


@dataclass
class CaseView:
    """One case whole: its input and ideal, and every trial of every target."""

    eval_id: str
    case_id: str
    input: str
    ideal: str
    trials: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def grid_page(conn: sqlite3.Connection, run_ids: Sequence[str], *, page: int = 0, filter: str = "all",
              query: str = "", sort: str = "case", base: str | None = None,
              after: tuple[str, str] | None = None, before: tuple[str, str] | None = None,
              last: bool = False) -> GridPage:
    """The cases of ``run_ids`` that ``filter`` and ``query`` keep, ``page`` of them in ``sort`` order.

    ``regressions`` keeps the cases whose pass fraction (over every target) is lower than in
    ``base`` (a run id); without one it keeps nothing. The whole grid in case order is paged by
    key: the page after the (eval, case) ``after``, the one before ``before``, or the ``last``
    one (``page`` then only numbers it); the others by offset.
    """
    filter, sort = (filter if filter in FILTERS else "all"), (sort if sort in SORTS else "case")
    sel = select_runs(conn, run_ids)
    if filter == "all" and not query and sort == "case":
        return _keyset_page(conn, sel, page, after=after, before=before, last=last)
    sql, params = _filtered_sql(conn, sel, filter, query, sort, base)
    params.update(limit=GRID_PAGE + 1, offset=page * GRID_PAGE)
    keys = [tuple(row) for row in conn.execute(sql, params)]
    cases = _cases(conn, sel, keys[:GRID_PAGE])
    targets = sorted({t for case in cases for t in case["targets"]})
    return GridPage(targets, cases, page, len(keys) > GRID_PAGE, filter, query, sort, base,
                    earlier=page > 0)


def _filtered_sql(conn: sqlite3.Connection, sel: Selection, filter: str, query: str, sort: str,
                  base: str | None) -> tuple[str, dict[str, Any]]:
    """The statement listing the cases a filter, search and sort keep, in order (``:limit`` and
    ``:offset`` left to bind), and its parameters."""
    params: dict[str, Any] = {f"p{i}": value for i, value in enumerate(sel.params)}
    join, keep = "", FILTERS[filter]
    if filter == "regressions" and base is None:
        keep = "0"
    elif filter == "regressions" and base is not None:
        base_sel = select_runs(conn, [base])
        params.update({f"b{i}": value for i, value in enumerate(base_sel.params)})
        join = _BASE_JOIN.format(where=_named(base_sel.where, "b"))
    params["q"] = query
    sql = _PAGE_SQL.format(table=sel.table, where=_named(sel.where, "p"), join=join, filter=keep,
                           sort=SORTS[sort], hit=_HIT_SQL if query else ", 1 as hit")
    return sql, params


def grid_keys(conn: sqlite3.Connection, run_ids: Sequence[str], *, filter: str = "all", query: str = "",
              sort: str = "case", base: str | None = None) -> tuple[Selection, list[tuple[str, str]]]:
    """Every (eval, case) of the grid as filtered, searched and sorted, in order, and the selection."""
    filter, sort = (filter if filter in FILTERS else "all"), (sort if sort in SORTS else "case")
    sel = select_runs(conn, run_ids)
    if filter == "all" and not query and sort == "case":
        sql = _KEYS_SQL.format(where=_named(sel.where, "p"), bound="1", order="asc")
        params = {f"p{i}": value for i, value in enumerate(sel.params)}
    else:
        sql, params = _filtered_sql(conn, sel, filter, query, sort, base)
    return sel, [(row[0], row[1]) for row in conn.execute(sql, {**params, "limit": -1, "offset": 0})]


def neighbours(conn: sqlite3.Connection, run_ids: Sequence[str], key: tuple[str, str], *, filter: str = "all",
               query: str = "", sort: str = "case",
               base: str | None = None) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """The cases before and after ``key`` in the grid as filtered, searched and sorted (None at an
    end, or when the case is not in that grid)."""
    filter, sort = (filter if filter in FILTERS else "all"), (sort if sort in SORTS else "case")
    sel = select_runs(conn, run_ids)
    if filter == "all" and not query and sort == "case":
        found = []
        for bound, order in (("(eval_id, case_id) < (:e, :c)", "desc"),
                             ("(eval_id, case_id) > (:e, :c)", "asc")):
            sql = _KEYS_SQL.format(where=_named(sel.where, "p"), bound=bound, order=order)
            params = {f"p{i}": value for i, value in enumerate(sel.params)}
            row = conn.execute(sql, {**params, "e": key[0], "c": key[1], "limit": 1, "offset": 0}).fetchone()
            found.append((row[0], row[1]) if row else None)
        return found[0], found[1]
    keys = grid_keys(conn, run_ids, filter=filter, query=query, sort=sort, base=base)[1]
    if key not in keys:
        return None, None
    at = keys.index(key)
    return (keys[at - 1] if at else None), (keys[at + 1] if at + 1 < len(keys) else None)


def _keyset_page(conn: sqlite3.Connection, sel: Selection, page: int, *, after: tuple[str, str] | None,
                 before: tuple[str, str] | None, last: bool) -> GridPage:
    """A page of the whole grid in case order, read from a key: after ``after``, before ``before``
    (read backwards), the last page (backwards from the end), else page ``page`` from the start
    (the links the viewer writes name a key)."""
    params: dict[str, Any] = {f"p{i}": value for i, value in enumerate(sel.params)}
    backwards = before is not None or last
    from_start = after is None and not backwards  # a page number alone (an old link): skip to it
    params.update(limit=GRID_PAGE + 1, offset=page * GRID_PAGE if from_start else 0)
    bound, key = "1", after or before
    if key is not None:
        bound = "(eval_id, case_id) < (:e, :c)" if before is not None else "(eval_id, case_id) > (:e, :c)"
        params.update(e=key[0], c=key[1])
    sql = _KEYS_SQL.format(where=_named(sel.where, "p"), bound=bound, order="desc" if backwards else "asc")
    keys: list[tuple[str, str]] = [(row[0], row[1]) for row in conn.execute(sql, params)]
    beyond = len(keys) > GRID_PAGE
    keys = keys[:GRID_PAGE]
    if backwards:
        keys.reverse()
    cases = _cases(conn, sel, keys)
    targets = sorted({t for case in cases for t in case["targets"]})
    more = (not backwards and beyond) or (before is not None and bool(keys))
    earlier = beyond if backwards else (after is not None or page > 0)
    return GridPage(targets, cases, page, more, "all", "", "case", None, keyset=True,
                    first=keys[0] if keys else None, last=keys[-1] if keys else None, earlier=earlier)


def _named(where: str, prefix: str) -> str:
    """A selection's condition with its ``?`` marks named ``:{prefix}0``, ``:{prefix}1``, …"""
    parts = where.split("?")
    return "".join(part + (f":{prefix}{i}" if i < len(parts) - 1 else "") for i, part in enumerate(parts))


def _cases(conn: sqlite3.Connection, sel: Selection, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The grid rows of ``keys``, in their order: each target's trials, and the case's counts."""
    if not keys:
        return []
    cases: dict[tuple[str, str], dict[str, Any]] = {
        key: {"eval": key[0], "case": key[1], "n": 0, "passed": 0, "errors": 0, "input": "", "targets": {},
              "rates": {}}  # rates: per target [passed, scored]
        for key in keys}
    sql = _TRIALS_SQL.format(where=sel.where, keys=", ".join(["(?, ?)"] * len(keys)))
    for eval_id, case_id, target, index, status, score, err, kind, output, text in conn.execute(
            sql, [*sel.params, *(part for key in keys for part in key)]):
        case = cases[(eval_id, case_id)]
        case["input"] = case["input"] or _excerpt(text)
        case["n"] += 1
        case["errors"] += err
        case["passed"] += status in PASSING
        rate = case["rates"].setdefault(target, [0, 0])
        rate[0] += status in PASSING
        rate[1] += not err
        case["targets"].setdefault(target, []).append(  # an error has its kind, and no score
            {"trial": index, "status": status, "score": None if err else score, "output": _excerpt(output),
             "error": (kind or status) if err else None})
    return list(cases.values())


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT else text[:EXCERPT] + " …"


_CASE_SQL = f"""select rc.run_id as member, r.service_name || '/' || coalesce(r.model, '') as target,
  r.run_index, coalesce(r.status, case when r.error_kind is not null then 'ERROR' when r.passed then 'PASS'
    else 'FAIL' end) as status,
  r.score, r.input, r.ideal, r.output, r.failure_reason, r.error_kind, r.feedback, r.rubric_scores,
  r.judge_model, r.judge_status_code, r.status_code, r.reply_model, r.reasoning, r.attempt_count,
  r.latency_ms, r.ttft_ms, r.prompt_tokens, r.completion_tokens, r.reasoning_tokens, r.judge_prompt_tokens,
  r.judge_completion_tokens, r.cost_usd, r.judge_cost_usd, r.kind, r.tool_calls, r.details,
  r.stdout_log_path, r.cell_key, r.run_id, r.evaluated_at, r.grader_scores, {infra_error_sql("r.")} as err
from run_cells rc join results r on r.cell_key = rc.cell_key and r.run_id = rc.result_run_id
where rc.run_id in ({{marks}}) and r.eval_id = ? and r.case_id = ? order by target, member, r.run_index"""


def case_view(conn: sqlite3.Connection, run_ids: Sequence[str], eval_id: str,
              case_id: str) -> CaseView | None:
    """Every trial of one case in ``run_ids``, whole; None when the runs have no such case.

    Trials are grouped in columns by target, and by target and run where several of ``run_ids``
    hold the same target (two runs of one configuration, side by side).
    """
    sql = _CASE_SQL.format(marks=", ".join("?" * len(run_ids)))
    cursor = conn.execute(sql, [*run_ids, eval_id, case_id])
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, values, strict=True)) for values in cursor]
    if not rows:
        return None
    view = CaseView(eval_id, case_id, rows[0]["input"] or "", rows[0]["ideal"] or "")
    root = store_folder(conn)
    runs_of: dict[str, set[str]] = {}
    for row in rows:
        runs_of.setdefault(row["target"], set()).add(row["member"])
    for row in rows:
        row["attempts"] = conn.execute(
            "select call, attempt, status_code, error_kind, error_message, latency_ms from attempts"
            " where cell_key = ? and run_id = ? order by call, attempt",  # this version's own attempts
            [row["cell_key"], row["run_id"]]).fetchall()
        row["rubric_scores"] = strictjson.stored(row["rubric_scores"], None)
        row["grader_scores"] = strictjson.stored(row["grader_scores"], None)
        row["rendered"] = render_text(row["output"])
        row["output_sha256"] = output_sha256(row["output"])
        row["conversation"] = _conversation(row["details"])
        row["parts"] = matcher_parts(strictjson.stored(row["details"], None))
        if row["kind"] == "agent":
            row.update(_agent_parts(row, root))
        column = row["target"] if len(runs_of[row["target"]]) == 1 else f"{row['target']} · {row['member']}"
        view.trials.setdefault(column, []).append(row)
    return view


def _conversation(details: Any) -> dict[str, Any] | None:
    """A tool loop's conversation, rendered as a transcript, with its turns and stop reason."""
    parsed = strictjson.stored(details, None)
    trajectory = parsed.get("trajectory") if isinstance(parsed, dict) else None
    if not isinstance(trajectory, dict) or not isinstance(trajectory.get("transcript"), list):
        return None
    user = trajectory.get("user") if isinstance(trajectory.get("user"), dict) else None
    rendered = (render_text(json.dumps(trajectory["transcript"], ensure_ascii=False)) if user is None
                else Rendered("chat", render_dialogue(trajectory["transcript"]), ""))
    return {"rendered": rendered, "user": user,
            "turns": len(trajectory.get("turns") or []), "calls": len(trajectory.get("tool_calls") or []),
            "stop_reason": trajectory.get("stop_reason"), "state": trajectory.get("state")}


def side_by_side(view: CaseView, left: str | None, right: str | None,
                 trial: int | None) -> dict[str, Any] | None:
    """Two columns of a case (``left``, ``right``: column names; default its first two) at one trial
    (default the first both have): their trials and a word diff of their outputs; None with fewer
    than two columns."""
    columns = list(view.trials)
    if len(columns) < 2:
        return None
    left = left if left in view.trials else columns[0]
    right = right if right in view.trials and right != left else next(c for c in columns if c != left)
    by_trial = [{t["run_index"]: t for t in view.trials[c]} for c in (left, right)]
    shared = sorted(by_trial[0].keys() & by_trial[1].keys())
    if not shared:
        return {"columns": columns, "left": left, "right": right, "trial": None, "trials": [], "pair": None}
    chosen = trial if trial in shared else shared[0]
    pair = (by_trial[0][chosen], by_trial[1][chosen])
    return {"columns": columns, "left": left, "right": right, "trial": chosen, "trials": shared, "pair": pair,
            "diff": word_diff(pair[0]["output"], pair[1]["output"])}


def _agent_parts(row: dict[str, Any], root: Any) -> dict[str, Any]:
    calls = strictjson.stored(row["tool_calls"], None) or []
    details = strictjson.stored(row["details"], None) or {}
    result = details.get("verification_result") if isinstance(details, dict) else None
    checks = (result.get("details") if isinstance(result, dict) else None) or []
    return {"tool_names": [str(c.get("name")) for c in calls if isinstance(c, dict)],
            "checks": [(str(c.get("name")), bool(c.get("passed")), str(c.get("message") or ""))
                       for c in checks if isinstance(c, dict)],
            "log": log_tail(row["stdout_log_path"], root)}


def previous_run(conn: sqlite3.Connection, run_ids: Sequence[str]) -> str | None:
    """The run a grid's regressions are measured against by default: the latest run started before
    the first of ``run_ids`` with the same configuration fingerprint; None when there is none (an
    unrelated run is no baseline)."""
    marks = ", ".join("?" * len(run_ids))
    first = conn.execute(f"select min(started_at), min(fingerprint) from runs where run_id in ({marks})",
                         list(run_ids)).fetchone()
    if first is None or first[0] is None or first[1] is None:
        return None
    found = conn.execute(
        f"select run_id from runs where started_at < ? and run_id not in ({marks}) and fingerprint = ?"
        " order by started_at desc, run_id desc limit 1", [first[0], *run_ids, first[1]]).fetchone()
    return found[0] if found else None
