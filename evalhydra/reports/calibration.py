"""``evalhydra calibrate``: each judge of some runs against people's labels, and the pass rates
it gave corrected for its errors (:mod:`evalhydra.reports.judges`, :mod:`evalhydra.stats.judge`).

Per judge (an eval's judge service and model; the eval names its rubric): the labels it is measured
on, its sensitivity, specificity, agreement, Cohen's κ and Krippendorff's α with intervals, the
base rate, and its self-consistency when the runs were rejudged; per target it judged, the raw pass
rate and the corrected one with its interval.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from tabulate import tabulate

from evalhydra.reports.aggregate import Target, case_histograms
from evalhydra.reports.judges import JudgeCalibration, judge_report
from evalhydra.reports.selection import Selection, select_runs
from evalhydra.stats.clustered import CaseHistogram, pass_rate_interval
from evalhydra.stats.judge import ALPHA_RESAMPLES

__all__ = ["calibration", "calibration_docs", "render_calibration"]


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


def _interval(value: Any, ci: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{value:.3f}"


def _consistency(doc: dict[str, Any]) -> str:
    """The judge's agreement with itself, over how many outputs it judged again ("—" without rejudges)."""
    if doc["self_consistency"] is None:
        return "—"
    return f"{doc['self_consistency']:.3f} ({doc['repeated_outputs']} outputs)"


def render_calibration(docs: list[dict[str, Any]], fmt: str = "text") -> str:
    """The calibration as ``text`` (a table per judge and its targets) or ``json``."""
    if fmt == "json":
        return json.dumps(docs, indent=2, ensure_ascii=False)
    if not docs:
        return "No judged results in these runs (model_grade or rubric matchers)."
    rows, targets = [], []
    for doc in docs:
        a = doc["agreement"]
        rows.append([doc["eval"], f"{doc['judge_service']}/{doc['judge_model']}",
                     doc["judge_settings"] or "—", a["n"],
                     _interval(a["sensitivity"], a["sensitivity_ci"]),
                     _interval(a["specificity"], a["specificity_ci"]),
                     f"{a['agreement']:.3f}" if a["n"] else "—", _interval(a["kappa"], a["kappa_ci"]),
                     _interval(a["alpha"], a["alpha_ci"]), f"{a['base_rate']:.3f}" if a["n"] else "—",
                     _consistency(doc)])
        for t in doc["targets"]:
            shown = (f"{t['corrected_pass_rate']:.3f} [{t['corrected_ci_low']:.3f},"
                     f" {t['corrected_ci_high']:.3f}]" if t["corrected_pass_rate"] is not None
                     else t["problem"] or "—")
            targets.append([doc["eval"], f"{t['service']}/{t['model']}", t["cases"],
                            f"{t['raw_pass_rate']:.3f}", shown])
    head = ["eval", "judge", "matcher", "labels", "sensitivity [95%]", "specificity [95%]", "agreement",
            "kappa [95%]", "alpha [95%]", "base rate", "self-consistency"]
    return "\n".join([tabulate(rows, head, tablefmt="simple"), "",
                      "pass rates corrected for the judge's errors (Rogan-Gladen, delta-method 95%"
                      " interval):",
                      tabulate(targets, ["eval", "target", "cases", "judged", "corrected [95%]"],
                               tablefmt="simple")])
