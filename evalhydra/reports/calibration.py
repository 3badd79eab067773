"""``evalhydra calibrate``'s text: the judges' agreement with people's labels and the corrected
pass rates (:mod:`evalhydra.analysis.calibration` computes them), and the simulated users' audit
(:mod:`evalhydra.analysis.simulator_audit`), as tables, or JSON."""

from __future__ import annotations

import json
from typing import Any

from tabulate import tabulate

__all__ = ["render_calibration", "render_simulator_audit"]


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


def render_simulator_audit(rows: list[dict[str, Any]], fmt: str = "text") -> str:
    """The simulator audit as ``text`` (a table per eval and target: the audit's counts, the raw and
    the corrected pass rate; then pass^k raw and corrected) or ``json``
    (:func:`~evalhydra.analysis.simulator_audit.simulator_corrections`'s rows)."""
    if fmt == "json":
        return json.dumps(rows, indent=2, ensure_ascii=False)
    if not rows:
        return "No conversation with a simulated user in these runs."
    table = []
    for row in rows:
        ci = (row["corrected_ci_low"], row["corrected_ci_high"])
        corrected = (_interval(row["corrected_pass_rate"], ci) if row["corrected_pass_rate"] is not None
                     else row["problem"] or "—")
        kinds = ", ".join(f"{k} {n}" for k, n in row["kinds"].items()) or "—"
        table.append([row["eval_id"], f"{row['service_name']}/{row['model']}", row["n"],
                      f"{row['broken_failures']}/{row['audited_failures']}",
                      f"{row['broken_passes']}/{row['audited_passes']}", kinds,
                      f"{row['raw_pass_rate']:.3f}", corrected])
    head = ["eval", "target", "conversations", "broken/audited failures", "broken/audited passes",
            "kinds", "raw", "corrected [95%]"]
    hats = [[row["eval_id"], f"{row['service_name']}/{row['model']}", k, f"{v['raw']:.3f}",
             _interval(v["corrected"], (v["ci_low"], v["ci_high"])) if v["corrected"] is not None
             else v["problem"] or "—"] for row in rows for k, v in row["pass_hat_k"].items()]
    out = ["pass rates corrected for the simulated user's errors (pass rate among unbroken"
           " conversations, logit delta-method 95% interval):", tabulate(table, head, tablefmt="simple")]
    if hats:
        out += ["", "pass^k corrected for the simulated user's errors (moments of the observed pass^1..k,"
                " logit delta-method 95% interval):",
                tabulate(hats, ["eval", "target", "k", "raw", "corrected [95%]"], tablefmt="simple")]
    return "\n".join(out)
