"""The statistics' error rates, measured through the product (issue 31's figures).

Each replication draws 30 cases afresh, per-case pass probabilities
p ~ Beta(0.5, 0.5) (true mean 0.5), and runs them against the built-in mock,
whose "Reply OK with probability p." prompts pass with exactly p:

1. ``evaluate(...).stats`` at 8 trials and at 1 trial: does the 95% interval
   cover 0.5, and how wide is it?
2. a second model as good on average but different case by case (p' drawn
   afresh): how often does ``compare --fail-on-regression`` exit 1 (a false
   alarm)?
3. a model 15 points worse on average and different case by case (p' drawn
   afresh from Beta(0.35, 0.65), mean 0.35): how often does the gate exit 1
   (power), beside SciPy's case-clustered paired t-test (``ttest_rel``, one-sided at 5 % as the
   gate is, on the per-case pass fractions read from the same store)?

Usage::

    python bench/stats_figures.py [--replications 100] [--trials 8]
    python bench/stats_figures.py --methods   # interval methods by simulation alone (no runs)

Targets (issue 31): coverage ≥ 90% with mean width ≤ 0.40 at 8 trials; ≥ 90% and ≤ 0.45 at one
trial; false alarms ≤ 7%; power within 10 points of the paired t-test's.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path
from statistics import fmean
from typing import Any

import numpy as np
from scipy import stats

import evalhydra
from evalhydra.cli.store_commands import main as store_main
from evalhydra.stats.clustered import pass_rate_interval
from evalhydra.stats.student_t import t_quantile

CASES = 30


def _registry(root: Path, probabilities: list[float]) -> Path:
    (root / "evals" / "g").mkdir(parents=True)
    (root / "data" / "g" / "e").mkdir(parents=True)
    (root / "services.json").write_text("[]")
    spec = {"id": "g.e", "group": "g", "description": "known per-case pass probabilities",
            "dataset_path": "data/g/e/test.jsonl", "split": "test", "matcher": {"kind": "exact_match"},
            "default_run_count": 1}
    (root / "evals" / "g" / "e.json").write_text(json.dumps(spec))
    lines = [json.dumps({"id": f"c{i:02d}", "input": f"Reply OK with probability {p:.6f}.", "ideal": "OK"})
             for i, p in enumerate(probabilities)]
    (root / "data" / "g" / "e" / "test.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _run(work: Path, name: str, probabilities: list[float], trials: int, seed: int) -> evalhydra.EvalResult:
    registry = _registry(work / name, probabilities)
    with contextlib.redirect_stdout(io.StringIO()):
        return evalhydra.evaluate([f"registry={registry}", "eval=g.e", f"store.path={work / 's.db'}",
                                   f"trials={trials}", f"service.mock.seed={seed}", "report=[json]"])


def _gate(work: Path, base: str, cand: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return store_main(["compare", "--store", str(work / "s.db"), base, cand, "--fail-on-regression"])


def _fractions(work: Path, run_id: str) -> dict[str, float]:
    conn = sqlite3.connect(work / "s.db")
    rows = conn.execute("select r.case_id, avg(r.passed) from results r join run_cells rc"
                        " on rc.cell_key = r.cell_key where rc.run_id = ? group by r.case_id", [run_id])
    out = {case: float(rate) for case, rate in rows}
    conn.close()
    return out


def _reference_regression(work: Path, base: str, cand: str) -> bool:
    a, b = _fractions(work, base), _fractions(work, cand)
    cases = sorted(a.keys() & b.keys())
    # one-sided at 5 %, as the gate tests (an exact one-sided sign-flip test: is the candidate worse?)
    test = stats.ttest_rel([b[c] for c in cases], [a[c] for c in cases], alternative="less")
    return bool(test.pvalue < 0.05)


def replicate(rep: int, trials: int) -> dict[str, Any]:
    """One replication: four runs in a fresh store."""
    rng = random.Random(rep)
    pa = [rng.betavariate(0.5, 0.5) for _ in range(CASES)]
    same = [rng.betavariate(0.5, 0.5) for _ in range(CASES)]
    lower = [rng.betavariate(0.35, 0.65) for _ in range(CASES)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = _run(work, "base", pa, trials, rep)
        one = _run(work, "one", pa, 1, rep + 10_000)
        equal = _run(work, "equal", same, trials, rep + 20_000)
        worse = _run(work, "worse", lower, trials, rep + 30_000)
        assert base.run_id and equal.run_id and worse.run_id
        out = {}
        for key, result in (("many", base), ("one", one)):
            (stat,) = result.stats
            out[f"{key}_covers"] = stat["ci_low"] <= 0.5 <= stat["ci_high"]
            out[f"{key}_width"] = stat["ci_high"] - stat["ci_low"]
        out["false_alarm"] = _gate(work, base.run_id, equal.run_id) == 1
        out["detected"] = _gate(work, base.run_id, worse.run_id) == 1
        out["reference_detected"] = _reference_regression(work, base.run_id, worse.run_id)
    return out


def product_figures(replications: int, trials: int) -> dict[str, float]:
    """The four figures over ``replications`` replications."""
    results = []
    for rep in range(replications):
        results.append(replicate(rep, trials))
        print(f"\r{rep + 1}/{replications}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return {
        f"coverage_{trials}_trials": fmean(r["many_covers"] for r in results),
        f"mean_width_{trials}_trials": fmean(r["many_width"] for r in results),
        "coverage_1_trial": fmean(r["one_covers"] for r in results),
        "mean_width_1_trial": fmean(r["one_width"] for r in results),
        "false_alarm_rate": fmean(r["false_alarm"] for r in results),
        "power_15_points": fmean(r["detected"] for r in results),
        "power_15_points_paired_t": fmean(r["reference_detected"] for r in results),
    }


# --- interval methods by simulation alone -------------------------------------------


def _t_interval(fractions: np.ndarray) -> tuple[float, float]:
    n = len(fractions)
    half = t_quantile(0.975, n - 1) * float(fractions.std(ddof=1)) / n**0.5
    mean = float(fractions.mean())
    return max(0.0, mean - half), min(1.0, mean + half)


def method_figures(suites: int = 4000) -> list[dict[str, Any]]:
    """Coverage and width of the t-interval over case fractions and of evalhydra's interval."""
    rng = np.random.default_rng(1)
    rows = []
    for cases in (30, 100):
        for a, b in ((0.5, 0.5), (2, 2), (8, 2), (1, 9), (0.3, 0.05)):
            for trials in (1, 3, 8):
                passes = rng.binomial(trials, rng.beta(a, b, size=(suites, cases)))
                truth, hits, widths = a / (a + b), Counter(), {"t": [], "evalhydra": []}
                for suite in passes:
                    rate = pass_rate_interval(Counter((trials, int(c)) for c in suite))
                    for name, (low, high) in (("t", _t_interval(suite / trials)),
                                              ("evalhydra", (rate.low, rate.high))):
                        hits[name] += low <= truth <= high
                        widths[name].append(high - low)
                rows.append({"cases": cases, "beta": f"({a:g}, {b:g})", "trials": trials,
                             **{f"{k} coverage": hits[k] / suites for k in widths},
                             **{f"{k} width": fmean(v) for k, v in widths.items()}})
    return rows


def main() -> None:
    """Print the figures (or, with --methods, the simulated comparison of interval methods)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replications", type=int, default=100)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--methods", action="store_true")
    args = parser.parse_args()
    if args.methods:
        for row in method_figures():
            print(json.dumps(row))
        return
    figures = product_figures(args.replications, args.trials)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
