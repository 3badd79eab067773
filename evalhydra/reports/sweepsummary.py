"""The end of a sweep on one screen: eval × target pass rates with their intervals, and each
job that did not pass with why (its exit code and the gates it failed)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tabulate import tabulate

from evalhydra.reports.summary import DASH, Gates, failing_stats, gate_text, store_stats
from evalhydra.store.db import Store

__all__ = ["sweep_summary"]

#: What each exit code of a job means, for the sweep's last lines.
_EXIT_MEANING = {1: "a gate failed", 2: "a config or usage error", 3: "could not measure", 130: "interrupted"}


def sweep_summary(store: Store, run_ids: Sequence[str]) -> str:
    """The sweep's table (evals down, targets across, ``pass [95% CI]`` in each cell) and a line
    per job that did not exit 0."""
    stats = store_stats(store, run_ids)
    targets = list(dict.fromkeys(f"{s['service']}:{s['model']}" for s in stats))
    evals = list(dict.fromkeys(s["eval"] for s in stats))
    cell = {(s["eval"], f"{s['service']}:{s['model']}"): _rate(s) for s in stats}
    rows = [[ev, *(cell.get((ev, t), DASH) for t in targets)] for ev in evals]
    lines = [tabulate(rows, headers=["eval", *targets])]
    lines += [_job_line(store, run_id) for run_id in run_ids]
    return "\n".join(line for line in lines if line)


def _rate(stat: Mapping[str, Any]) -> str:
    if not stat["scored"]:
        return DASH
    return f"{stat['pass_rate']:.1%} [{stat['ci_low']:.1%}, {stat['ci_high']:.1%}]"


def _job_line(store: Store, run_id: str) -> str:
    """``job 1 (service=mock_slow): exit 1, a gate failed: smoke.reply_ok pass rate 50.0% < 90.0%``,
    or "" for a job that passed."""
    row = store.conn.execute("select job_num, overrides, exit_code, config from runs where run_id = ?",
                             (run_id,)).fetchone()
    if row is None or not row[2]:
        return ""
    job_num, overrides, code, config = row
    swept = ", ".join(json.loads(overrides or "[]"))
    why = _EXIT_MEANING.get(int(code), "failed")
    if int(code) == 1:
        gates = _gates(config)
        failed = failing_stats(store_stats(store, [run_id], judges=gates.judged or None), gates)
        why += ": " + "; ".join(f"{s['eval']} {gate_text(s)}" for s in failed[:3])
    return f"job {job_num} ({swept or run_id}): exit {code}, {why}"


def _gates(config: str | None) -> Gates:
    return Gates.from_run(json.loads(config or "{}").get("run") or {})
