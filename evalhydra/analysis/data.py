"""Gather everything a report needs from the store, in a bounded number of queries.

:func:`collect` returns a :class:`ReportData` holding aggregates only (plus
at most :data:`~evalhydra.analysis.aggregate.CAP_TRIALS` trial rows), so
``report.md``, ``trials.json``, ``summary.md`` and the CI gates are pure
functions of it, whatever the number of stored results.
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalhydra.analysis import aggregate as agg
from evalhydra.analysis.baselines import baseline_comparisons_sql
from evalhydra.analysis.calibration import calibration_docs
from evalhydra.analysis.compare import adjust_family
from evalhydra.analysis.evalstats import Totals, evals_and_targets
from evalhydra.analysis.graders import grader_rows
from evalhydra.analysis.judges import has_labels
from evalhydra.analysis.selection import Selection
from evalhydra.analysis.simulator_audit import has_audits, simulator_corrections
from evalhydra.analysis.ttft import FirstToken, first_token_latency
from evalhydra.core import strictjson

__all__ = ["ReportData", "collect", "sweep_baseline_of", "target_comparisons"]


@dataclass
class ReportData:
    """A report's inputs (see :func:`collect`)."""

    runs: list[dict[str, Any]]
    evals_doc: dict[str, Any]
    cases: agg.CaseData
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)
    trials_total: int = 0
    failing: list[dict[str, Any]] = field(default_factory=list)
    failing_total: int = 0
    bests: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    grid_cases: list[tuple[str, str]] = field(default_factory=list)
    grid: dict[tuple[str, str, str, str], list[str]] = field(default_factory=dict)
    first_token: dict[agg.Target, FirstToken] = field(default_factory=dict)  # streamed targets only
    graders: list[dict[str, Any]] = field(default_factory=list)  # openai_graders criteria, by name
    judges: list[dict[str, Any]] = field(default_factory=list)  # judges calibrated on labels (calibrate)
    simulators: list[dict[str, Any]] = field(default_factory=list)  # audited simulated users, per target

    def targets(self) -> list[agg.TargetAgg]:
        """Per eval × service × model totals, in ``evals.json`` order."""
        out = []
        for ev in self.evals_doc["evals"]:
            for svc in ev["services"]:
                for model in svc["models"]:
                    key = (ev["group"], ev["eval_id"], svc["service_name"], model["model"] or "")
                    out.append(self.cases.targets[key])
        return out

    def model_stats(self, key: agg.Target) -> dict[str, Any]:
        """The seed stats object of one eval × service × model."""
        for ev in self.evals_doc["evals"]:
            if (ev["group"], ev["eval_id"]) != key[:2]:
                continue
            for svc in ev["services"]:
                for model in svc["models"]:
                    if (svc["service_name"], model["model"] or "") == key[2:]:
                        return dict(model["stats"])
        raise KeyError(key)


def _case_views(conn: sqlite3.Connection, sel: Selection, data: ReportData) -> None:
    shown = sorted({(r["eval_id"], r["case_id"]) for r in data.trials})
    data.grid_cases = data.cases.first_keys[: agg.CAP_GRID]
    views = agg.case_views(conn, sel, data.cases.first_keys, data.grid_cases, shown)
    data.cases.by_case, data.grid, data.bests = views.by_case, views.grid, views.bests


def sweep_baseline_of(conn: sqlite3.Connection,
                      run_ids: Sequence[str]) -> tuple[str | None, dict[str, str] | None]:
    """The baseline of a sweep's comparisons, from what the store holds of its jobs: the
    ``baseline=SERVICE[:MODEL]`` the jobs were given, else job 0's service and model (the first
    value of every key swept, as written). Every reader of a sweep (its report, ``report
    --sweep``, ``view --static --sweep``, the viewer's sweep page) takes it from here.

    Returns:
        ``(service, {service: model})``, or ``(None, None)`` when the runs are not the jobs of one
        sweep.
    """
    if not run_ids:
        return None, None
    marks = ",".join("?" * len(run_ids))
    rows = conn.execute(f"select run_id, sweep_dir, config from runs where run_id in ({marks})"
                        " order by job_num is null, job_num, started_at, run_id", list(run_ids)).fetchall()
    if len(rows) != len(set(run_ids)) or len({r[1] for r in rows}) != 1 or rows[0][1] is None:
        return None, None
    chosen = (strictjson.stored(rows[0][2], None) or {}).get("baseline")
    if chosen:
        service, _, model = str(chosen).partition(":")
        return service or None, {service: model} if service and model else None
    first = conn.execute("select r.service_name, r.model from run_cells rc join results r on"
                         " r.cell_key = rc.cell_key and r.run_id = rc.result_run_id where rc.run_id = ?"
                         " limit 1", [rows[0][0]]).fetchone()
    return (first[0], {first[0]: first[1]}) if first else (None, None)


def target_comparisons(conn: sqlite3.Connection, sel: Selection, evals_doc: Mapping[str, Any],
                       targets: Sequence[tuple[str, str]], *, baseline_service: str | None = None,
                       baseline_models: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Each service and model against its baseline, Holm-adjusted together; [] for a single target.

    Args:
        conn: A connection to the store.
        sel: The results covered.
        evals_doc: Their ``evals.json`` document.
        targets: Their (service, model) pairs.
        baseline_service: Baseline for service comparisons (default: the first service,
            alphabetically).
        baseline_models: Baseline model per service (default: first seen).
    """
    services = sorted({service for service, _ in targets})
    if len(services) < 2 and len(set(targets)) <= len(services):
        return []
    rows: list[dict[str, Any]] = baseline_comparisons_sql(
        conn, sel, evals_doc, baseline_service=baseline_service or services[0],
        baseline_models=baseline_models)["baseline_comparisons"]
    adjust_family(rows)  # the verdicts shown together hold their error rate together
    return rows


def collect(conn: sqlite3.Connection, sel: Selection, runs: Sequence[dict[str, Any]], *,
            baseline_service: str | None = None,
            baseline_models: Mapping[str, str] | None = None,
            case_rows: Callable[[], list[tuple[Any, ...]]] | None = None,
            summary: Mapping[str, Any] | None = None,
            on_totals: Callable[[Totals], None] | None = None) -> ReportData:
    """Everything report.md, trials.json, summary.md and the gates need.

    Args:
        conn: A connection to the store.
        sel: The results covered.
        runs: Their ``runs`` rows.
        baseline_service: Baseline for service comparisons (default: the first
            service, alphabetically, when there are several).
        baseline_models: Baseline model per service (default: first seen).
        case_rows: Returns :func:`~evalhydra.analysis.aggregate.case_rows` for ``sel``
            when another thread runs that query (default: run it here, after the totals).
        summary: The run summary of ``sel``, which names the targets' judges (default: found
            in the results).
        on_totals: Given :func:`~evalhydra.analysis.evalstats.evals_and_targets`' totals as soon
            as they are computed (before the per-case statistics fold into them).
    """
    evals_doc, targets = evals_and_targets(conn, sel)
    if on_totals is not None:
        on_totals((copy.deepcopy(evals_doc), copy.deepcopy(targets)))
    data = ReportData(list(runs), evals_doc,
                      agg.collect_cases(conn, sel, targets, case_rows() if case_rows else None))
    data.first_token = first_token_latency(conn, sel, targets.values())
    data.graders = grader_rows(conn, sel)
    if has_labels(conn):
        data.judges = calibration_docs(conn, sel, hists={t.key: t.hist for t in data.cases.targets.values()},
                                       summary=summary)
    if has_audits(conn):
        data.simulators = simulator_corrections(conn, sel.run_ids)
    data.comparisons = target_comparisons(conn, sel, evals_doc, [key[2:] for key in data.cases.targets],
                                          baseline_service=baseline_service, baseline_models=baseline_models)
    data.trials = agg.trial_rows(conn, sel)
    data.trials_total = data.cases.total
    data.failing = agg.failing_rows(conn, sel)
    statuses = data.cases.overall().statuses
    data.failing_total = sum(statuses[s] for s in ("FAIL", "TIMEOUT", "ERROR"))
    _case_views(conn, sel, data)
    return data
