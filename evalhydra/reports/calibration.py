"""``evalhydra calibrate``: each judge of some runs against people's labels, and the pass rates
it gave corrected for its errors (:mod:`evalhydra.stats.judge`).

A judge is an eval's judge service and model (the eval names its rubric). Its verdicts on the
outputs people labelled (:mod:`evalhydra.store.labels`) give its sensitivity, specificity,
agreement, Cohen's κ and Krippendorff's α; each target's judged pass rate is then corrected by
Rogan and Gladen's estimator, its interval carrying the test set's variance (clustered by case)
and the labels'.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from tabulate import tabulate

from evalhydra.reports.selection import PASSED_SQL, select_runs
from evalhydra.stats.judge import agreement, corrected_rate
from evalhydra.store.labels import labels_by_output, output_sha256
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["calibration", "render_calibration"]

_JUDGED_SQL = f"""select eval_id, service_name, coalesce(model, ''), case_id, output, {PASSED_SQL},
  coalesce(judge_service, ''), coalesce(judge_model, '')
from {{table}} where ({{where}}) and judge_model is not null and not {INFRA_ERROR_SQL}"""


def calibration(conn: sqlite3.Connection, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per judge (eval, judge service, judge model): its agreement with the labels, and each target's
    raw and corrected pass rate."""
    labels = labels_by_output(conn)
    sel = select_runs(conn, run_ids)
    judges: dict[tuple[str, str, str], dict[str, Any]] = {}
    for eval_id, service, model, case_id, output, passed, judge_service, judge_model in conn.execute(
            _JUDGED_SQL.format(table=sel.table, where=sel.where), sel.params):
        judge = judges.setdefault((eval_id, judge_service, judge_model), {"pairs": [], "targets": {}})
        human = labels.get((eval_id, case_id, output_sha256(output)))
        if human is not None:
            judge["pairs"].append((human, bool(passed)))
        judge["targets"].setdefault((service, model), {}).setdefault(case_id, []).append(passed)
    return [_judge_doc(key, judge) for key, judge in sorted(judges.items())]


def _raw(cases: dict[str, list[int]]) -> tuple[float, float]:
    """The mean of per-case pass fractions and its variance, clustered by case."""
    fractions = [sum(trials) / len(trials) for trials in cases.values()]
    mean = sum(fractions) / len(fractions)
    if len(fractions) < 2 or all(len(t) == 1 for t in cases.values()):
        return mean, mean * (1 - mean) / len(fractions)
    spread = math.fsum((f - mean) ** 2 for f in fractions) / (len(fractions) - 1)
    return mean, spread / len(fractions)


def _judge_doc(key: tuple[str, str, str], judge: dict[str, Any]) -> dict[str, Any]:
    found = agreement(judge["pairs"])
    targets = []
    for (service, model), cases in sorted(judge["targets"].items()):
        raw, variance = _raw(cases)
        fixed = corrected_rate(raw, variance, found) if found.n else None
        targets.append({"service": service, "model": model, "cases": len(cases), "raw_pass_rate": raw,
                        "corrected": asdict(fixed) if fixed else None,
                        "problem": (fixed.problem if fixed else "no labels for this judge's outputs")})
    return {"eval": key[0], "judge_service": key[1], "judge_model": key[2], "labels": found.n,
            "agreement": asdict(found), "targets": targets}


def _interval(value: Any, ci: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{value:.3f}"


def render_calibration(docs: list[dict[str, Any]], fmt: str = "text") -> str:
    """The calibration as ``text`` (a table per judge and its targets) or ``json``."""
    if fmt == "json":
        return json.dumps(docs, indent=2, ensure_ascii=False)
    if not docs:
        return "No judged results in these runs (model_grade or rubric matchers)."
    rows, targets = [], []
    for doc in docs:
        a = doc["agreement"]
        rows.append([doc["eval"], f"{doc['judge_service']}/{doc['judge_model']}", a["n"],
                     _interval(a["sensitivity"], a["sensitivity_ci"]),
                     _interval(a["specificity"], a["specificity_ci"]),
                     f"{a['agreement']:.3f}" if a["n"] else "—", _interval(a["kappa"], a["kappa_ci"]),
                     _interval(a["alpha"], a["alpha_ci"]), f"{a['base_rate']:.3f}" if a["n"] else "—"])
        for t in doc["targets"]:
            fixed = t["corrected"] or {}
            shown = (f"{fixed['estimate']:.3f} [{fixed['low']:.3f}, {fixed['high']:.3f}]"
                     if fixed.get("estimate") is not None else t["problem"] or "—")
            targets.append([doc["eval"], f"{t['service']}/{t['model']}", t["cases"],
                            f"{t['raw_pass_rate']:.3f}", shown])
    head = ["eval", "judge", "labels", "sensitivity [95%]", "specificity [95%]", "agreement", "kappa [95%]",
            "alpha [95%]", "base rate"]
    return "\n".join([tabulate(rows, head, tablefmt="simple"), "",
                      "pass rates corrected for the judge's errors (Rogan-Gladen, delta-method 95%"
                      " interval):",
                      tabulate(targets, ["eval", "target", "cases", "judged", "corrected [95%]"],
                               tablefmt="simple")])
