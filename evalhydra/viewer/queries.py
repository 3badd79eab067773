"""The SQL behind the viewer's run list and its live status, one page at a time."""

from __future__ import annotations

import sqlite3
from typing import Any

from evalhydra.reports.aggregate import run_histograms
from evalhydra.reports.clustered import pass_rate_interval
from evalhydra.store.rows import infra_error_sql

__all__ = ["PAGE_SIZE", "run_status", "runs_page"]

#: Runs on one page of the list.
PAGE_SIZE = 50

_VERDICTS = {0: "passed", 1: "gate failed", 2: "usage error", 3: "could not measure", 130: "interrupted"}


def runs_page(conn: sqlite3.Connection, query: str = "", page: int = 0) -> tuple[list[dict[str, Any]], bool]:
    """One page of runs, newest first, whose id, evals or services contain ``query``: each with its
    evals, targets, cells, pass rate and 95 % interval (clustered by case), errors, cost, verdict
    and status; and whether a next page exists."""
    ids = [row[0] for row in conn.execute(
        "select run_id from runs where run_id like ?1 or sweep_dir like ?1 or config like ?1"
        " order by started_at desc, run_id limit ?2 offset ?3",
        [f"%{query}%", PAGE_SIZE + 1, page * PAGE_SIZE])]
    more, ids = len(ids) > PAGE_SIZE, ids[:PAGE_SIZE]
    if not ids:
        return [], False
    marks = ", ".join("?" * len(ids))
    err = infra_error_sql("r.")
    sql = f"""select ru.run_id, ru.started_at, ru.finished_at, ru.status, ru.exit_code, ru.sweep_dir,
          group_concat(distinct r.eval_id) as evals,
          group_concat(distinct r.service_name || '/' || coalesce(r.model, '')) as targets,
          count(r.cell_key) as cells, coalesce(sum({err}), 0) as errors,
          coalesce(sum(r.cost_usd), 0) + coalesce(sum(r.judge_cost_usd), 0) as cost
        from runs ru left join run_cells rc on rc.run_id = ru.run_id
        left join results r on r.cell_key = rc.cell_key
        where ru.run_id in ({marks}) group by ru.run_id order by ru.started_at desc, ru.run_id"""
    conn.row_factory = sqlite3.Row
    rows = [dict(row) for row in conn.execute(sql, ids)]
    histograms = run_histograms(conn, ids)
    for row in rows:
        interval = pass_rate_interval(histograms.get(row["run_id"], {}))
        row["rate"] = None if not interval.n_cases else interval
        row["verdict"] = _VERDICTS.get(row["exit_code"], "")
    return rows, more


def run_status(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """What a live page polls: the run's status and how many of its cells are stored, passed, errored."""
    found = conn.execute("select status, finished_at, cells_total from runs where run_id = ?",
                         [run_id]).fetchone()
    if found is None:
        return None
    err = infra_error_sql("r.")
    cells, passed, errors = conn.execute(
        f"select count(r.cell_key), coalesce(sum(r.passed), 0), coalesce(sum({err}), 0) from run_cells rc"
        " join results r on r.cell_key = rc.cell_key where rc.run_id = ?", [run_id]).fetchone()
    return {"run_id": run_id, "status": found[0], "finished_at": found[1], "cells_total": found[2],
            "cells": cells, "passed": passed, "errors": errors}
