"""A run's summary: per eval × service × model totals, case histograms and grader figures,
small enough to keep.

:func:`run_summary` reads them from the store in two grouping passes;
:func:`target_rows` turns them into the rows the viewer and ``report.html``
show (pass rate with its case-clustered 95 % interval, tokens, cost). A run's
summary is saved in ``run_summaries`` when it ends, so the viewer lists and
opens runs of any size without a pass over their results; summaries of
several runs merge (:func:`merge_summaries`) when their targets do not overlap.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalhydra.analysis.aggregate import Target, TargetAgg, case_histograms
from evalhydra.analysis.graders import grader_rows
from evalhydra.analysis.selection import DURATION_SQL, PASSED_SQL, select_runs
from evalhydra.stats.clustered import RateInterval, pass_rate_interval
from evalhydra.store.rows import INFRA_ERROR_SQL
from evalhydra.store.runinfo import selection_of, wall_seconds

__all__ = ["header_facts", "merge_summaries", "overall_interval", "run_summary", "saved_summaries",
           "saved_summary_of", "summary_histograms", "summary_of", "target_rows", "TargetRow"]

_TOTALS_SQL = f"""select "group", eval_id, service_name, coalesce(model, ''), count(*),
  sum({PASSED_SQL}), sum({INFRA_ERROR_SQL}), coalesce(sum(prompt_tokens), 0)
    + coalesce(sum(completion_tokens), 0) + coalesce(sum(judge_prompt_tokens), 0)
    + coalesce(sum(judge_completion_tokens), 0),
  coalesce(sum(reasoning_tokens), 0), coalesce(sum(cost_usd), 0) + coalesce(sum(judge_cost_usd), 0),
  sum({DURATION_SQL}), coalesce(judge_service, ''), judge_model, run_id,
  sum(judge_model is not null and not {INFRA_ERROR_SQL})
from {{table}} where {{where}} group by 1, 2, 3, 4, 12, 13, 14 order by 2, 3, 4, 1"""

#: The totals a target's rows add up (in the order of ``_TOTALS_SQL``'s columns 5 to 11).
_SUMMED = ("n", "passed", "errors", "tokens", "thinking", "cost", "seconds")


def run_summary(conn: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, Any]:
    """The totals, case histograms and judges of every eval × service × model in ``run_ids``.

    Returns:
        ``{"cells": n, "targets": [{group, eval, service, model, n, passed, errors, tokens,
        thinking, cost, seconds, hist: [[scored, passed, cases], …], judges: [[judge service,
        judge model, the results' run, judged results], …]}, …], "graders": […]}`` (JSON-ready;
        ``judges`` counts scored results only, by the run that stored them, so that the
        viewer finds a target's judge without a pass over its results; ``graders``:
        :func:`~evalhydra.analysis.graders.grader_rows`). A run that holds whole runs' rows (one
        resumed after a kill) names them in ``sources``: a later selection reads them by run id.
    """
    sel = select_runs(conn, run_ids)
    histograms = case_histograms(conn, sel)
    targets: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for row in conn.execute(_TOTALS_SQL.format(table=sel.table, where=sel.where), sel.params):
        key, summed, (judge_service, judge_model, run_id, judged) = row[:4], row[4:11], row[11:]
        target = targets.get(key)
        if target is None:
            hist = histograms.get(key, Counter())
            target = targets[key] = {
                "group": key[0], "eval": key[1], "service": key[2], "model": key[3],
                **dict.fromkeys(_SUMMED, 0), "hist": [[s, ok, c] for (s, ok), c in sorted(hist.items())],
                "judges": []}
        for name, value in zip(_SUMMED, summed, strict=True):
            target[name] += value or 0
        if judge_model is not None and judged:
            target["judges"].append([judge_service, judge_model, run_id, judged])
    rows = list(targets.values())
    for target in rows:
        target["judges"].sort()
    summary = {"cells": sum(t["n"] for t in rows), "targets": rows, "graders": grader_rows(conn, sel)}
    if sel.whole and sel.params != sel.run_ids:  # a resumed run holds others' rows whole: keep which
        summary["sources"] = list(sel.params)
    return summary


#: A finished run's saved summary, while no cell was added to the run since (a result written
#: over drops it: the store's triggers).
_SAVED_SQL = """select s.run_id, s.summary from run_summaries s join runs r on r.run_id = s.run_id
where s.run_id in ({marks}) and r.status != 'running'
  and s.cells = (select count(*) from run_cells where run_id = s.run_id)"""


def saved_summaries(conn: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The summaries saved when these runs ended, by run, of the runs whose summary still holds
    (a run still running, or one that gained cells since, has none)."""
    if not run_ids:
        return {}
    rows = conn.execute(_SAVED_SQL.format(marks=", ".join("?" * len(run_ids))), list(run_ids))
    return {run_id: json.loads(text) for run_id, text in rows}


def saved_summary_of(conn: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, Any] | None:
    """The summary of whole runs merged from their saved ones (None when one of them has none, or
    two of them share a target)."""
    saved = saved_summaries(conn, run_ids)
    if not run_ids or len(saved) != len(set(run_ids)):
        return None
    return merge_summaries(saved[run_id] for run_id in dict.fromkeys(run_ids))


def summary_of(targets: Iterable[TargetAgg]) -> dict[str, Any]:
    """A summary of totals already aggregated (``report.html``'s), in :func:`run_summary`'s shape
    (without grader figures: the report reads its own)."""
    rows = [{"group": t.key[0], "eval": t.key[1], "service": t.key[2], "model": t.key[3], "n": t.n,
             "passed": t.passed, "errors": t.errors, "tokens": t.input_tokens + t.output_tokens,
             "thinking": t.reasoning_tokens, "cost": t.cost_usd, "seconds": t.duration,
             "hist": [[s, ok, c] for (s, ok), c in sorted(t.hist.items())]} for t in targets]
    return {"cells": sum(t["n"] for t in rows), "targets": rows, "graders": []}


def merge_summaries(summaries: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One summary of several runs', or None when two of them share a target (their cases
    could overlap: the merged histogram would count them twice)."""
    targets: list[dict[str, Any]] = []
    graders: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str, str]] = set()
    for summary in summaries:
        graders += summary.get("graders", [])
        for target in summary["targets"]:
            key = (target["group"], target["eval"], target["service"], target["model"])
            if key in seen:
                return None
            seen.add(key)
            targets.append(dict(target))
    targets.sort(key=lambda t: (t["eval"], t["service"], t["model"], t["group"]))
    graders.sort(key=lambda g: (g["eval"], g["service"], g["model"], g["grader"]))
    return {"cells": sum(t["n"] for t in targets), "targets": targets, "graders": graders}


def _histogram(target: Mapping[str, Any]) -> Counter[tuple[int, int]]:
    return Counter({(scored, ok): cases for scored, ok, cases in target["hist"]})


def summary_histograms(summary: Mapping[str, Any]) -> dict[Target, Counter[tuple[int, int]]]:
    """Each target's case histogram, as :func:`~evalhydra.analysis.aggregate.case_histograms`
    reads it from the results."""
    return {(t["group"], t["eval"], t["service"], t["model"]): _histogram(t) for t in summary["targets"]}


@dataclass(slots=True)
class TargetRow:
    """One target's row of a summary table (the viewer's run page, ``report.html``).

    Attributes:
        rate: The pass rate (mean over cases of each case's pass fraction); None without a
            scored result. ``low``/``high``: its 95 % interval, clustered by case (``method``).
        tokens: Tokens sent and received, the judges' included; ``thinking`` of them reasoning.
        cost: US dollars.
    """

    eval: str
    service: str
    model: str
    n: int
    passed: int
    failed: int
    errors: int
    scored: int
    rate: float | None
    low: float
    high: float
    method: str
    tokens: int
    thinking: int
    cost: float


def target_rows(summary: Mapping[str, Any]) -> list[TargetRow]:
    """Per target: counts, pass rate with its 95 % interval (clustered by case), tokens and cost."""
    rows = []
    for t in summary["targets"]:
        rate = pass_rate_interval(_histogram(t))
        scored = t["n"] - t["errors"]
        rows.append(TargetRow(t["eval"], t["service"], t["model"], t["n"], t["passed"], scored - t["passed"],
                              t["errors"], scored, rate.estimate if rate.n_cases else None, rate.low,
                              rate.high, rate.method, t["tokens"], t["thinking"], t["cost"]))
    return rows


def overall_interval(summary: Mapping[str, Any]) -> RateInterval:
    """The pass rate of every (target, case) cluster of the summary, with its 95 % interval."""
    total: Counter[tuple[int, int]] = Counter()
    for target in summary["targets"]:
        total.update(_histogram(target))
    return pass_rate_interval(total)


def header_facts(summary: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The facts atop a page (``parts.html.j2``'s ``facts``): its runs, when, how long (wall time,
    and apart the cells' time summed), the totals, and the runs that ran part of their cases."""
    targets = summary["targets"]
    n, passed, errors = (sum(t[name] for t in targets) for name in ("n", "passed", "errors"))
    return {"runs": [r["run_id"] for r in runs],
            "fingerprints": sorted({str(r.get("fingerprint") or "") for r in runs} - {""}),
            "started": min((r.get("started_at") or "" for r in runs), default=""),
            "finished": max((r.get("finished_at") or "" for r in runs), default=""),
            "n": n, "passed": passed, "errors": errors, "failed": n - passed - errors,
            "tokens": sum(t["tokens"] for t in targets), "thinking": sum(t["thinking"] for t in targets),
            "cost": sum(t["cost"] for t in targets),
            "duration": round(sum(t.get("seconds") or 0.0 for t in targets), 1),
            "wall": wall_seconds(runs),
            "selections": {r["run_id"]: note for r in runs if (note := selection_of(r.get("config")))}}
