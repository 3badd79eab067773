"""``trials.json``: trials as a statistic (an evalhydra artifact, not a seed one).

Per eval × service × model: cases, trials per case, unbiased pass@k and pass^k
for k = 1..min(trials, 5) (each case's estimate averaged over cases), the
STABLE/FLAKY/BROKEN counts, and the flakiest cases (flakiness =
2·min(passed, failed)/trials; at most 1,000 per target, flakiest first). A target
whose simulated user was audited also carries ``simulator_corrected``: its pass rate and
pass^k corrected for the simulator's errors, with 95 % intervals.
Trials with an infrastructure error are left out (a case with nothing else
counts as ``no_result``); ``trials_per_case`` counts the remaining trials.
"""

from __future__ import annotations

from typing import Any

from evalhydra.analysis import aggregate as agg
from evalhydra.analysis.data import ReportData

__all__ = ["TRIALS_SCHEMA_VERSION", "trials_json"]

TRIALS_SCHEMA_VERSION = 1


def _target(t: agg.TargetAgg, flaky: list[tuple[float, str, int, int]]) -> dict[str, Any]:
    ks, at, hat = agg.pass_k_table(t)
    trials = sorted({n for n, _ in t.hist})
    return {
        "group": t.key[0],
        "eval_id": t.key[1],
        "service_name": t.key[2],
        "model": t.key[3],
        "cases": t.cases,
        "trials": t.n,
        "trials_per_case": {"min": trials[0] if trials else 0, "max": trials[-1] if trials else 0},
        "pass_at_k": {str(k): at[k] for k in ks},
        "pass_hat_k": {str(k): hat[k] for k in ks},
        "stability": {"stable": t.verdicts["STABLE"], "flaky": t.verdicts["FLAKY"],
                      "broken": t.verdicts["BROKEN"], "no_result": t.verdicts["NO RESULT"]},
        "flaky_cases": [{"case_id": c, "passed": p, "trials": n, "flakiness": f}
                        for f, c, p, n in flaky],
    }


def _simulator_block(row: dict[str, Any]) -> dict[str, Any]:
    """A target's pass rate and pass^k corrected for its simulated user's audited errors."""
    return {"pass_rate": row["corrected_pass_rate"], "ci_low": row["corrected_ci_low"],
            "ci_high": row["corrected_ci_high"], "problem": row["problem"], "method": row["method"],
            "audited": row["audited_passes"] + row["audited_failures"],
            "broken": row["broken_passes"] + row["broken_failures"],
            "pass_hat_k": row["pass_hat_k"], "pass_hat_k_method": row["pass_hat_k_method"]}


def trials_json(data: ReportData) -> dict[str, Any]:
    """The ``trials.json`` document for a report's data."""
    audited = {(r["eval_id"], r["service_name"], r["model"] or ""): r for r in data.simulators}
    targets = []
    for t in data.targets():
        doc = _target(t, data.cases.flaky_by_target.get(t.key, []))
        if (row := audited.get(t.key[1:])) is not None:
            doc["simulator_corrected"] = _simulator_block(row)
        targets.append(doc)
    return {"schema_version": TRIALS_SCHEMA_VERSION, "max_k": agg.MAX_K, "targets": targets}
