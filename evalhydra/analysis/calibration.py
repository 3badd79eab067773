"""``evalhydra calibrate``'s figures: each judge of some runs against people's labels, and the pass
rates it gave corrected for its errors (:mod:`evalhydra.analysis.judges`, :mod:`evalhydra.stats.judge`;
:mod:`evalhydra.reports.calibration` renders them).

Per judge (an eval's judge service and model; the eval names its rubric): the labels it is measured
on, its sensitivity, specificity, agreement, Cohen's κ and Krippendorff's α with intervals, the
base rate, and its self-consistency when the runs were rejudged; per target it judged, the raw pass
rate and the corrected one with its interval.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from evalhydra.analysis.aggregate import Target, case_histograms
from evalhydra.analysis.judges import JudgeCalibration, judge_report
from evalhydra.analysis.selection import Selection, select_runs
from evalhydra.stats.clustered import CaseHistogram, pass_rate_interval
from evalhydra.stats.judge import ALPHA_RESAMPLES

__all__ = ["calibration", "calibration_docs"]


def calibration(conn: sqlite3.Connection, run_ids: Sequence[str],
                resamples: int = ALPHA_RESAMPLES) -> list[dict[str, Any]]:
    """Per judge (eval, judge service, judge model) of the runs: its agreement with the labels, its
    self-consistency, and each target's raw and corrected pass rate."""
    return calibration_docs(conn, select_runs(conn, run_ids), resamples)


def calibration_docs(conn: sqlite3.Connection, sel: Selection, resamples: int = ALPHA_RESAMPLES, *,
                     hists: Mapping[Target, CaseHistogram] | None = None,
                     summary: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """:func:`calibration` of a selection (the reports' "Judges" section).

    ``hists`` (the targets' case histograms) and ``summary`` (the selection's run summary, which
    names each target's judges) spare the passes over the results a caller already made."""
    hists = case_histograms(conn, sel) if hists is None else hists
    report = judge_report(conn, sel, hists, resamples=resamples, summary=summary)
    docs = {key: _judge_doc(found) for key, found in report.judges.items()}
    for target, key in sorted(report.judge_of.items()):
        fields, rate = report.targets[target], pass_rate_interval(hists.get(target, {}))
        docs[key]["targets"].append({
            "service": target[2], "model": target[3], "cases": rate.n_cases, "raw_pass_rate": rate.estimate,
            **{name: fields[name] for name in ("corrected_pass_rate", "corrected_ci_low", "corrected_ci_high",
                                               "corrected_ci_method")},
            "problem": fields["corrected_problem"]})
    return [docs[key] for key in sorted(docs)]


def _judge_doc(found: JudgeCalibration) -> dict[str, Any]:
    return {"eval": found.key[0], "judge_service": found.key[1], "judge_model": found.key[2],
            "judge_settings": found.key[3], "labels": found.agreement.n, "agreement": asdict(found.agreement),
            "repeated_outputs": found.repeated_outputs, "self_consistency": found.self_consistency,
            "targets": []}
