"""Gather everything a report needs from the store, in a bounded number of queries.

:func:`collect` returns a :class:`ReportData` holding aggregates only (plus
at most :data:`~evalhydra.reports.aggregate.CAP_TRIALS` trial rows), so
``report.md``, ``trials.json``, ``summary.md`` and the CI gates are pure
functions of it, whatever the number of stored results.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalhydra.reports import aggregate as agg
from evalhydra.reports.calibration import calibration_docs
from evalhydra.reports.compare import adjust_family, baseline_comparisons_sql
from evalhydra.reports.evalstats import evals_and_targets
from evalhydra.reports.graders import grader_rows
from evalhydra.reports.judges import has_labels
from evalhydra.reports.selection import Selection
from evalhydra.reports.ttft import FirstToken, first_token_latency

__all__ = ["ReportData", "collect", "target_comparisons"]


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
            summary: Mapping[str, Any] | None = None) -> ReportData:
    """Everything report.md, trials.json, summary.md and the gates need.

    Args:
        conn: A connection to the store.
        sel: The results covered.
        runs: Their ``runs`` rows.
        baseline_service: Baseline for service comparisons (default: the first
            service, alphabetically, when there are several).
        baseline_models: Baseline model per service (default: first seen).
        case_rows: Returns :func:`~evalhydra.reports.aggregate.case_rows` for ``sel``
            when another thread runs that query (default: run it here, after the totals).
        summary: The run summary of ``sel``, which names the targets' judges (default: found
            in the results).
    """
    evals_doc, targets = evals_and_targets(conn, sel)
    data = ReportData(list(runs), evals_doc,
                      agg.collect_cases(conn, sel, targets, case_rows() if case_rows else None))
    data.first_token = first_token_latency(conn, sel, targets.values())
    data.graders = grader_rows(conn, sel)
    if has_labels(conn):
        data.judges = calibration_docs(conn, sel, hists={t.key: t.hist for t in data.cases.targets.values()},
                                       summary=summary)
    data.comparisons = target_comparisons(conn, sel, evals_doc, [key[2:] for key in data.cases.targets],
                                          baseline_service=baseline_service, baseline_models=baseline_models)
    data.trials = agg.trial_rows(conn, sel)
    data.trials_total = data.cases.total
    data.failing = agg.failing_rows(conn, sel)
    statuses = data.cases.overall().statuses
    data.failing_total = sum(statuses[s] for s in ("FAIL", "TIMEOUT", "ERROR"))
    _case_views(conn, sel, data)
    return data
