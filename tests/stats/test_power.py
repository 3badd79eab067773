"""Sample sizes for the regression gate: checked against the noncentral t and by simulation."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path
from statistics import fmean

import pytest
from scipy import stats

from evalhydra.analysis.comparison import precision
from evalhydra.stats.clustered import CaseDiffs
from evalhydra.stats.power import (
    MAX_CASES,
    VarianceModel,
    cases_needed,
    from_assumptions,
    from_differences,
    from_one_target,
    min_detectable,
    noise_floor,
)
from tests.helpers import run_cli


def _exact_power(n: int, sd: float, drop: float) -> float:
    """Power of the one-sided 5% paired t-test against a true drop (noncentral t)."""
    df, shift = n - 1, drop * math.sqrt(n) / sd
    return float(stats.nct.cdf(-stats.t.ppf(0.95, df), df, -shift))


@pytest.mark.parametrize(("sd", "drop"), [(0.2, 0.05), (0.45, 0.05), (0.3, 0.15), (0.6, 0.1), (0.1, 0.2)])
def test_cases_needed_reach_the_power_by_the_noncentral_t(sd: float, drop: float) -> None:
    n = cases_needed(sd, drop)
    assert _exact_power(n, sd, drop) >= 0.79  # enough (to the approximation's accuracy)
    assert n == 5 or _exact_power(n - 1, sd, drop) < 0.81  # and no more than needed


def test_min_detectable_inverts_cases_needed() -> None:
    n = cases_needed(0.4, 0.05)
    assert min_detectable(0.4 / math.sqrt(n), n - 1) <= 0.05 < min_detectable(0.4 / math.sqrt(n - 1), n - 2)
    assert min_detectable(0.1, 0) == math.inf and min_detectable(0.1, 3) == math.inf  # 4 cases


def test_more_trials_help_only_the_within_case_part() -> None:
    model = VarianceModel(between=0.04, within=0.4, source="test")
    needs = [cases_needed(model.sd(k), 0.05) for k in (1, 3, 10, 100)]
    assert needs == sorted(needs, reverse=True) and needs[-1] >= cases_needed(0.2, 0.05)


def test_the_variance_parts_are_estimated_without_bias_from_a_comparison() -> None:
    """p_a, p_b ~ Beta(2, 2) independent per case: τ² = 2·Var(p) = 0.1, w = 2·E[p(1−p)] = 0.4."""
    rng = random.Random(7)
    between, within = [], []
    for _ in range(300):
        sums = CaseDiffs()
        for _ in range(40):
            fa, fb = (sum(rng.random() < p for _ in range(4)) / 4
                      for p in (rng.betavariate(2, 2), rng.betavariate(2, 2)))
            d = fb - fa
            sums.add(CaseDiffs(1, d, d * d, 4, 0, 0, 0, 0, 4, (fa * (1 - fa) + fb * (1 - fb)) * 4 / 3,
                               (fa * (1 - fa) + fb * (1 - fb)) / 3))
        model = from_differences(sums)
        assert model is not None and model.separable
        between.append(model.between)
        within.append(model.within)
    assert fmean(between) == pytest.approx(0.1, abs=0.01)
    assert fmean(within) == pytest.approx(0.4, abs=0.01)


def test_one_trial_per_case_cannot_separate_the_parts() -> None:
    model = from_differences(CaseDiffs(10, -1.0, 3.0, 1, 5, 1, 2, 2, 1))
    assert model is not None and not model.separable and model.within == 0.0
    assert model.sd(1) == model.sd(10)  # more trials are not assumed to help
    assert from_differences(CaseDiffs(1, 0.0, 0.0, 3, 0, 0, 0, 0, 3)) is None


def test_one_target_and_assumptions_give_the_two_model_variances() -> None:
    rng = random.Random(5)
    hist: Counter[tuple[int, int]] = Counter()
    for _ in range(4000):
        p = rng.betavariate(2, 2)  # Var(p) = 0.05, E[p(1-p)] = 0.2
        hist[(5, sum(rng.random() < p for _ in range(5)))] += 1
    model = from_one_target(hist, 0.0, correlation=0.5)  # a candidate as good on average
    assert model is not None
    assert model.between == pytest.approx(2 * 0.05 * 0.5, abs=0.01)
    assert model.within == pytest.approx(2 * 0.2, abs=0.02)
    assumed = from_assumptions(0.5, 0.0, case_sd=math.sqrt(0.05), correlation=0.5)
    assert (assumed.between, assumed.within) == (pytest.approx(0.05), pytest.approx(0.4))
    assert from_one_target({(1, 1): 1}, 0.05) is None


def test_a_target_that_always_passes_still_needs_cases_to_see_a_drop() -> None:
    """Nothing varies in the stored run, but a candidate 5 points lower would."""
    model = from_one_target({(3, 3): 20}, 0.05)
    assert model is not None and model.within == pytest.approx(0.95 * 0.05)
    assert 100 < cases_needed(model.sd(1), 0.05) < 300


def test_a_comparison_without_spread_is_still_underpowered_for_a_small_drop() -> None:
    """Two identical runs of deterministic cases show no spread; a 5-point drop would still be noisy."""
    diffs = CaseDiffs(38, 0.0, 0.0, 3, 17, 0, 0, 21, 3)
    info = precision(diffs, {"p_value": 1.0}, 0.05, baseline_rate=0.45)
    assert info is not None and info["underpowered"] and info["min_detectable"] > 0.15
    assert info["cases_needed"] == cases_needed(noise_floor(0.45, 0.05).sd(3), 0.05) > 38
    assert precision(diffs, {"p_value": 1.0}, 0.3, baseline_rate=0.45)["underpowered"] is False  # type: ignore[index]


@pytest.mark.parametrize(("option", "message"), [
    pytest.param(["--power", "0.9999999999999999"], "--power 0.9999999999999999: must be in [0.5, 0.9999]",
                 marks=pytest.mark.slow),
    (["--power", "nan"], "--power nan: must be in"),
    pytest.param(["--case-sd", "inf"], "--case-sd inf: must be in [0, 0.5]", marks=pytest.mark.slow),
    pytest.param(["--case-sd", "nan"], "--case-sd nan: must be in [0, 0.5]", marks=pytest.mark.slow),
    pytest.param(["--correlation", "5"], "--correlation 5.0: must be in [-1, 1]", marks=pytest.mark.slow),
    (["--correlation=-inf"], "--correlation -inf: must be in [-1, 1]"),
    (["--trials", "1,1000000"], "--trials: every trial count must be in 1..100,000"),
])
def test_power_refuses_assumptions_outside_their_range(option: list[str], message: str,
                                                       tmp_path: Path) -> None:
    """Issue 47, item 11: exit 2 with one error line, never a ZeroDivisionError."""
    done = run_cli("power", *option, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {message}")


@pytest.mark.slow
def test_power_prints_its_search_bound_as_a_bound(tmp_path: Path) -> None:
    done = run_cli("power", "--drop", "0.0001", "--trials", "1", "--format", "json", cwd=tmp_path)
    (row,) = json.loads(done.stdout)["rows"]
    assert row["cases"] is None and row["beyond"] == MAX_CASES
    text = run_cli("power", "--drop", "0.0001", "--trials", "1", cwd=tmp_path).stdout
    assert f"more than {MAX_CASES:,}" in text
