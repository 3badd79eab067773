"""The end of a sweep on one screen: eval × target pass rates with their intervals and each
target's difference from the sweep's baseline (the first value swept), the verdict of those
comparisons, and each job that did not pass with why (its exit code and the gates it failed)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tabulate import tabulate

from evalhydra.analysis.compare import is_improvement, is_regression
from evalhydra.analysis.data import sweep_baseline_of, target_comparisons
from evalhydra.analysis.evalstats import evals_and_targets
from evalhydra.analysis.gates import Gates, failing_stats
from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.targetstats import TargetStats, store_stats
from evalhydra.reports.summary import DASH, gate_text
from evalhydra.store.db import Store

__all__ = ["sweep_summary"]

#: What each exit code of a job means, for the sweep's last lines.
_EXIT_MEANING = {1: "a gate failed", 2: "a config or usage error", 3: "could not measure", 130: "interrupted"}


def sweep_summary(store: Store, run_ids: Sequence[str]) -> str:
    """The sweep's table (evals down, targets across, ``pass [95% CI]`` in each cell) and a line
    per job that did not exit 0."""
    stats = store_stats(store, run_ids)
    targets = _in_order_swept(store, run_ids, [f"{s.service}:{s.model}" for s in stats])
    evals = list(dict.fromkeys(s.eval for s in stats))
    rows_of = _comparisons(store, run_ids, [tuple(t.split(":", 1)) for t in targets])
    moved = _moves(rows_of, targets)
    cell = {(s.eval, f"{s.service}:{s.model}"): _rate(s) for s in stats}
    rows = [[ev, *(cell.get((ev, t), DASH) + moved.get((ev, t), "") for t in targets)] for ev in evals]
    lines = [tabulate(rows, headers=["eval", *targets]), _verdict_line(rows_of)]
    lines += [_job_line(store, run_id) for run_id in run_ids]
    return "\n".join(line for line in lines if line)


def _in_order_swept(store: Store, run_ids: Sequence[str], targets: Sequence[str]) -> list[str]:
    """The targets in the order the sweep's jobs ran them (job 0's first: the baseline)."""
    marks = ",".join("?" * len(run_ids))
    swept = [f"{s}:{m}" for s, m in store.conn.execute(
        f"select r.service_name, r.model from runs ru join run_cells rc on rc.run_id = ru.run_id"
        f" join results r on r.cell_key = rc.cell_key and r.run_id = rc.result_run_id"
        f" where ru.run_id in ({marks}) group by ru.run_id, r.service_name, r.model"
        f" order by min(ru.job_num is null), min(ru.job_num), min(ru.started_at), ru.run_id", list(run_ids))]
    order = {t: i for i, t in enumerate(dict.fromkeys(swept))}
    return sorted(dict.fromkeys(targets), key=lambda t: order.get(t, len(order)))


def _comparisons(store: Store, run_ids: Sequence[str],
                 targets: list[tuple[str, ...]]) -> list[dict[str, Any]]:
    """The sweep report's comparisons: each target against the sweep's baseline."""
    if len(set(targets)) < 2:
        return []
    sel = select_runs(store.conn, run_ids)
    service, models = sweep_baseline_of(store.conn, run_ids)
    return target_comparisons(store.conn, sel, evals_and_targets(store.conn, sel)[0],
                              [(t[0], t[1]) for t in targets], baseline_service=service,
                              baseline_models=models)


def _column(row: Mapping[str, Any], targets: Sequence[str]) -> str | None:
    """The table column a comparison row's candidate is (a service's, when it has one model)."""
    if row["target_kind"] == "model":
        return f"{row['service_name']}:{row['candidate_name']}"
    columns = [t for t in targets if t.split(":", 1)[0] == row["candidate_name"]]
    return columns[0] if len(columns) == 1 else None


def _moves(rows: Sequence[Mapping[str, Any]], targets: Sequence[str]) -> dict[tuple[str, str], str]:
    """`` Δ −20.0 pts 🔻`` per (eval, column): the paired difference from the baseline."""
    out = {}
    for row in rows:
        column, paired = _column(row, targets), row.get("paired")
        if column and paired:
            mark = " 🔻" if is_regression(paired) else " 🔺" if is_improvement(paired) else ""
            out[(row["eval_id"], column)] = f" Δ {paired['difference'] * 100:+z.1f} pts{mark}"
    return out


def _verdict_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """The comparisons' verdict, as ``compare`` says it (Holm-adjusted over the sweep's rows)."""
    if not rows:
        return ""
    base = rows[0]["baseline_name"]
    worse = [f"{r['candidate_name']} on {r['eval_id']}" for r in rows if is_regression(r.get("paired"))]
    if worse:
        return f"verdict: REGRESSION against {base}: {', '.join(worse)} (Holm-adjusted p < 0.05)"
    verdicts = {str((r.get("paired") or {}).get("verdict", "")) for r in rows}
    if all(v.startswith("cannot reach") for v in verdicts):
        return f"verdict: cannot tell against {base}: {'; '.join(sorted(verdicts))}"
    better = [f"{r['candidate_name']} on {r['eval_id']}" for r in rows if is_improvement(r.get("paired"))]
    if better:
        return f"verdict: improvement against {base}: {', '.join(better)}; no significant regression"
    return f"verdict: no significant change against {base} (no Holm-adjusted p-value below 0.05)"


def _rate(stat: TargetStats) -> str:
    if not stat.scored:
        return DASH
    return f"{stat.pass_rate:.1%} [{stat.ci_low:.1%}, {stat.ci_high:.1%}]"


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
        why += ": " + "; ".join(f"{f.stat.eval} {gate_text(f)}" for f in failed[:3])
    return f"job {job_num} ({swept or run_id}): exit {code}, {why}"


def _gates(config: str | None) -> Gates:
    return Gates.from_run(json.loads(config or "{}").get("run") or {})
