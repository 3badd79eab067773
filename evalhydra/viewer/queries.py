"""The SQL behind the viewer's pages: the run list, a run's summary and live status, one page at a time.

A finished run's summary is read from ``run_summaries`` (saved when it ended,
dropped when one of its results is written over), so listing and opening a run
never passes over its results; a running run, or one without a saved summary,
is summarised from its results (:func:`evalhydra.analysis.runsummary.run_summary`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from evalhydra.analysis.data import sweep_baseline_of, target_comparisons
from evalhydra.analysis.evalstats import evals_and_targets
from evalhydra.analysis.runsummary import merge_summaries, overall_interval, run_summary, saved_summaries
from evalhydra.analysis.selection import select_runs
from evalhydra.store.rows import verdict_sql
from evalhydra.store.runinfo import selection_of, shown_status
from evalhydra.viewer.live import LiveSummaries

__all__ = ["HISTORY_RUNS", "PAGE_SIZE", "comparisons", "history", "run_status", "runs_page",
           "selection_summary", "summaries"]

#: Runs on one page of the list.
PAGE_SIZE = 50



def summaries(conn: sqlite3.Connection, run_ids: Sequence[str], live: LiveSummaries | None = None, *,
              graders: bool = True) -> dict[str, dict[str, Any]]:
    """Each run's summary: the saved one while it still holds; a running run's from ``live`` (kept
    up to date by the cells stored since); else computed now. Without ``graders`` (the figures of
    OpenAI Evals criteria), a run that ended without saving one (killed) is kept in ``live`` too,
    so a page showing it again reads only what is new."""
    saved = saved_summaries(conn, run_ids)
    out: dict[str, dict[str, Any]] = {}
    for run_id in run_ids:
        running = run_id not in saved and _running(conn, run_id)
        kept = running or (not graders and run_id not in saved)
        if live is not None and not kept:
            live.drop(run_id)
        if run_id in saved:
            out[run_id] = saved[run_id]
        elif kept and live is not None:
            out[run_id] = live.summary(conn, run_id)
        else:
            out[run_id] = run_summary(conn, [run_id])
    return out


def _running(conn: sqlite3.Connection, run_id: str) -> bool:
    found = conn.execute("select 1 from runs where run_id = ? and status = 'running'", [run_id]).fetchone()
    return found is not None


def selection_summary(conn: sqlite3.Connection, run_ids: Sequence[str],
                      live: LiveSummaries | None = None) -> dict[str, Any]:
    """The summary of several runs (a sweep, two runs compared): merged from theirs when their
    targets are apart, else computed over their cells together."""
    if len(run_ids) == 1:
        return summaries(conn, run_ids, live)[run_ids[0]]
    merged = merge_summaries(summaries(conn, run_ids, live).values())
    return merged if merged is not None else run_summary(conn, run_ids)


def runs_page(conn: sqlite3.Connection, query: str = "", page: int = 0, status: str = "",
              live: LiveSummaries | None = None) -> tuple[list[dict[str, Any]], bool]:
    """One page of runs, newest first, whose id, sweep or config contains ``query`` (and whose
    status is ``status``; ``gate``: those a gate failed): each with its evals, targets, cells,
    pass rate and 95 % interval (clustered by case), errors, cost, verdict and status; and
    whether a next page exists."""
    conn.row_factory = sqlite3.Row
    rows = [dict(row) for row in conn.execute(
        f"select run_id, started_at, finished_at, status, exit_code, sweep_dir, {verdict_sql()} as verdict,"
        " hostname, pid, config from runs"
        " where (run_id like ?1 escape '\\' or sweep_dir like ?1 escape '\\'"
        " or config like ?1 escape '\\')"
        " and (?4 = '' or status = ?4 or ?4 = 'gate' and exit_code = 1)"
        " order by started_at desc, run_id limit ?2 offset ?3",
        [f"%{_literal(query)}%", PAGE_SIZE + 1, page * PAGE_SIZE, status])]
    conn.row_factory = None
    more, rows = len(rows) > PAGE_SIZE, rows[:PAGE_SIZE]
    for row in rows:
        row["status"] = shown_status(row["status"], row.pop("hostname"), row.pop("pid"))
        row["selection"] = selection_of(row.pop("config"))
    found = summaries(conn, [row["run_id"] for row in rows], live)
    sweeps = _sweep_members(conn, {row["sweep_dir"] for row in rows if row["sweep_dir"]})
    for row in rows:
        summary = found[row["run_id"]]
        targets = summary["targets"]
        interval = overall_interval(summary)
        row.update(
            evals=sorted({t["eval"] for t in targets}),
            targets=sorted({f"{t['service']}/{t['model']}" for t in targets}),
            cells=summary["cells"], errors=sum(t["errors"] for t in targets),
            cost=sum(t["cost"] for t in targets), rate=interval if interval.n_cases else None,
            sweep=sweeps.get(row["sweep_dir"] or "", []))
    return rows, more


def _sweep_members(conn: sqlite3.Connection, sweep_dirs: set[str]) -> dict[str, list[str]]:
    """Every run of each sweep, oldest first."""
    out: dict[str, list[str]] = {}
    for sweep_dir in sorted(sweep_dirs):
        out[sweep_dir] = [row[0] for row in conn.execute(
            "select run_id from runs where sweep_dir = ? order by started_at, run_id", [sweep_dir])]
    return out


def run_status(conn: sqlite3.Connection, run_ids: Sequence[str],
               live: LiveSummaries | None = None) -> dict[str, Any] | None:
    """What a live page polls: the runs' status and how many of their cells are stored, passed, errored.

    Several runs (a sweep) are ``running`` while one of them is.
    """
    marks = ", ".join("?" * len(run_ids))
    found = conn.execute(f"select status, finished_at, cells_total, hostname, pid from runs"
                         f" where run_id in ({marks})", list(run_ids)).fetchall()
    if len(found) != len(set(run_ids)):
        return None
    statuses = [shown_status(row[0], row[3], row[4]) for row in found]
    status = "running" if "running" in statuses else statuses[0] if len(set(statuses)) == 1 else "mixed"
    cells, passed, errors = _counts(conn, run_ids, live)
    return {"run_id": ",".join(run_ids), "status": status, "finished_at": max(str(r[1] or "") for r in found),
            "cells_total": sum(r[2] or 0 for r in found), "cells": cells, "passed": passed, "errors": errors}


def _counts(conn: sqlite3.Connection, run_ids: Sequence[str],
                     live: LiveSummaries | None) -> tuple[int, int, int]:
    summary = selection_summary(conn, run_ids, live)
    targets = summary["targets"]
    return summary["cells"], sum(t["passed"] for t in targets), sum(t["errors"] for t in targets)


#: Runs a run's history chart shows, the run itself last.
HISTORY_RUNS = 20


def history(conn: sqlite3.Connection, run_id: str, live: LiveSummaries | None = None) -> list[dict[str, Any]]:
    """The pass rate with its 95 % interval (clustered by case) of ``run_id`` and the runs of the
    same configuration (fingerprint) started before it, oldest first, at most :data:`HISTORY_RUNS`."""
    found = conn.execute("select fingerprint, started_at from runs where run_id = ?", [run_id]).fetchone()
    if found is None or not found[0]:
        return []
    rows = conn.execute(
        "select run_id, started_at from runs where fingerprint = ? and (started_at < ? or run_id = ?)"
        " order by started_at desc, run_id desc limit ?",
        [found[0], found[1], run_id, HISTORY_RUNS]).fetchall()
    rows.reverse()
    found_summaries = summaries(conn, [r[0] for r in rows], live, graders=False)
    points = []
    for other, started in rows:
        interval = overall_interval(found_summaries[other])
        if interval.n_cases:
            points.append({"run_id": other, "started": started or "", "rate": interval.estimate,
                           "low": interval.low, "high": interval.high, "current": other == run_id})
    return points


def comparisons(conn: sqlite3.Connection, run_ids: Sequence[str],
                summary: dict[str, Any]) -> list[dict[str, Any]]:
    """A sweep's comparisons, as its ``report.html`` shows them: each service and model against the
    sweep's baseline (:func:`~evalhydra.analysis.data.sweep_baseline_of`: the first value swept),
    case-paired; [] for one target."""
    targets = [(t["service"], t["model"]) for t in summary["targets"]]
    if len(set(targets)) < 2:
        return []
    sel = select_runs(conn, run_ids)
    service, models = sweep_baseline_of(conn, run_ids)
    return target_comparisons(conn, sel, evals_and_targets(conn, sel)[0], targets, baseline_service=service,
                              baseline_models=models)


def _literal(text: str) -> str:
    """``text`` for a LIKE pattern that matches it literally (``%`` and ``_`` escaped by ``\\``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def side_targets(conn: sqlite3.Connection, runs: Sequence[str], service: str | None,
                 model: str | None, live: LiveSummaries | None = None) -> list[str]:
    """The ``service/model`` targets one side of a comparison covers (its runs, narrowed to its
    service and model), for the compare page to name: read from the runs' summaries (saved when
    they ended), not from their results."""
    if not runs:
        return [f"{service or '*'}/{model or '*'}"]
    found = {(t["service"], t["model"]) for summary in summaries(conn, runs, live, graders=False).values()
             for t in summary["targets"]
             if service in (None, t["service"]) and model in (None, t["model"])}
    return [f"{s}/{m}" for s, m in sorted(found)][:20]


