"""Issue 52, item 5: a judge's agreement with human labels, and its pass rate corrected for its
errors, checked against references and by simulation against known truth (seeded, pure Python
plus NumPy's binomial draws)."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest

from evalhydra.stats.judge import (
    POOR_JUDGE_MARGIN,
    agreement,
    cohen_kappa,
    corrected_difference,
    corrected_rate,
    krippendorff_alpha,
    self_consistency,
)


def _pairs(tp: int, fn: int, tn: int, fp: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * tp + [(True, False)] * fn + [(False, False)] * tn + [(False, True)] * fp


@pytest.mark.parametrize(("table", "kappa"), [
    ((20, 5, 15, 10), 0.4),  # worked examples: (po 0.7, pe 0.5), (po 0.6, pe 0.54), (po 0.6, pe 0.46)
    ((45, 15, 15, 25), (0.6 - 0.54) / (1 - 0.54)),
    ((25, 35, 35, 5), (0.6 - 0.46) / (1 - 0.46)),
])
def test_cohens_kappa_equals_the_worked_examples(table: tuple[int, int, int, int], kappa: float) -> None:
    assert cohen_kappa(*table)[0] == pytest.approx(kappa, abs=1e-9)


@pytest.mark.parametrize("table", [(20, 5, 15, 10), (45, 15, 15, 25), (3, 0, 0, 1), (50, 2, 40, 8),
                                   (10, 10, 10, 10), (7, 30, 12, 1)])
def test_krippendorffs_alpha_equals_the_reference_library(table: tuple[int, int, int, int]) -> None:
    pairs = _pairs(*table)
    data = np.array([[int(h) for h, _ in pairs], [int(j) for _, j in pairs]])
    reference = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert krippendorff_alpha(pairs) == pytest.approx(reference, abs=1e-9)


def _coverage(theta: float, *, sensitivity: float = 0.85, specificity: float = 0.75, labels: int = 100,
              cases: int = 500, runs: int = 1000, seed: int = 2026) -> tuple[float, float]:
    """Coverage of the corrected and the raw 95 % intervals of ``theta`` over ``runs`` simulated
    evaluations: a calibration set of ``labels`` cases and a test set of ``cases``."""
    rng = np.random.default_rng(seed)
    judged_pass = theta * sensitivity + (1 - theta) * (1 - specificity)
    covered = raw_covered = 0
    for _ in range(runs):
        positives = int(rng.binomial(labels, theta))
        tp, tn = int(rng.binomial(positives, sensitivity)), int(rng.binomial(labels - positives, specificity))
        calibration = agreement(_pairs(tp, positives - tp, tn, labels - positives - tn), resamples=0)
        raw = rng.binomial(cases, judged_pass) / cases
        result = corrected_rate(raw, raw * (1 - raw) / cases, calibration)
        assert result.low is not None and result.high is not None
        assert 0.0 <= result.low <= (result.estimate or 0) <= result.high <= 1.0
        covered += result.low <= theta <= result.high
        half = 1.959963984540054 * math.sqrt(raw * (1 - raw) / cases)
        raw_covered += raw - half <= theta <= raw + half
    return covered / runs, raw_covered / runs


@pytest.mark.parametrize("theta", [0.3, 0.5, 0.8])
def test_the_corrected_interval_covers_the_true_rate(theta: float) -> None:
    """A judge of sensitivity 0.85 and specificity 0.75, 100 labels: the corrected 95 % interval
    covers the true pass rate in 93–97 % of 1,000 runs; the raw one misses it (far at the ends)."""
    corrected, raw = _coverage(theta)
    print(f"theta {theta}: corrected coverage {corrected:.3f}, raw {raw:.3f}")
    assert 0.93 <= corrected <= 0.97
    if theta != 0.5:
        assert raw < 0.2


def test_a_judge_no_better_than_a_coin_is_not_corrected() -> None:
    coin = agreement(_pairs(25, 25, 27, 23))  # sensitivity 0.5, specificity 0.54
    result = corrected_rate(0.5, 0.0005, coin)
    assert result.estimate is None and result.problem is not None and "too poor" in result.problem
    assert POOR_JUDGE_MARGIN >= 0.5 + 0.54 - 1


def test_agreement_reports_error_rates_with_wilson_intervals() -> None:
    found = agreement(_pairs(40, 10, 30, 20))
    assert (found.sensitivity, found.specificity, found.agreement, found.base_rate) == (0.8, 0.6, 0.7, 0.5)
    assert found.sensitivity_ci[0] < 0.8 < found.sensitivity_ci[1]
    assert found.kappa_ci is not None and found.kappa_ci[0] < (found.kappa or 0) < found.kappa_ci[1]
    assert found.alpha_ci is not None and found.alpha_ci[0] <= (found.alpha or 0) <= found.alpha_ci[1]


def _calibrated(rng: np.random.Generator, theta: float, sensitivity: float, specificity: float,
                labels: int = 100):  # type: ignore[no-untyped-def]
    positives = int(rng.binomial(labels, theta))
    tp, tn = int(rng.binomial(positives, sensitivity)), int(rng.binomial(labels - positives, specificity))
    return agreement(_pairs(tp, positives - tp, tn, labels - positives - tn), resamples=0)


def _verdicts(rng: np.random.Generator, truth: np.ndarray, sensitivity: float,
              specificity: float) -> np.ndarray:
    draw = rng.random(truth.size)
    return np.where(truth, draw < sensitivity, draw < 1 - specificity).astype(float)


@pytest.mark.parametrize(("judges", "rates"), [
    (((0.9, 0.6), (0.7, 0.95)), (0.5, 0.5)),  # the judge changed; the model did not
    (((0.85, 0.75), (0.85, 0.75)), (0.5, 0.4)),  # one judge; the model dropped 10 points
])
def test_the_corrected_difference_covers_the_true_difference(judges: tuple[tuple[float, float], ...],
                                                              rates: tuple[float, float]) -> None:
    """Over 1,000 simulated comparisons of 300 cases, each side's judge calibrated on 100 labels:
    the corrected 95 % interval covers the true difference in 93–97 %. When only the judge changed,
    the raw paired difference looks like a significant regression in most of them."""
    rng = np.random.default_rng(52)
    same = judges[0] == judges[1]
    covered = raw_regressions = 0
    for _ in range(1000):
        truth_b = rng.random(300) < rates[0]
        truth_c = truth_b if rates[0] == rates[1] else rng.random(300) < rates[1]
        base, cand = _verdicts(rng, truth_b, *judges[0]), _verdicts(rng, truth_c, *judges[1])
        cal_b = _calibrated(rng, rates[0], *judges[0])
        cal_c = cal_b if same else _calibrated(rng, rates[1], *judges[1])
        found = corrected_difference([(list(zip(base, cand, strict=True)), cal_b, cal_c, same)])
        assert found.ci_low is not None and found.ci_high is not None
        covered += found.ci_low <= rates[1] - rates[0] <= found.ci_high
        d = cand - base
        raw_regressions += d.mean() + 1.96 * d.std(ddof=1) / math.sqrt(d.size) < 0
    print(f"judges {judges}: corrected coverage {covered / 1000:.3f}, raw regressions {raw_regressions}")
    assert 0.93 <= covered / 1000 <= 0.97
    if not same:
        assert raw_regressions > 900


def test_one_judge_on_both_sides_scales_the_difference() -> None:
    """With one judge and no calibration noise left (many labels), the corrected difference is the
    raw one over q̂₀ + q̂₁ − 1."""
    judge = agreement(_pairs(8000, 2000, 6000, 4000), resamples=0)  # 0.8 and 0.6: J = 0.4
    fractions = [(1.0, 0.0)] * 30 + [(0.0, 0.0)] * 50 + [(1.0, 1.0)] * 20
    found = corrected_difference([(fractions, judge, judge, True)])
    assert found.difference == pytest.approx(-0.3 / 0.4)
    assert found.ci_low is not None and found.ci_high is not None and found.ci_high < 0


def test_a_poor_judge_leaves_the_difference_uncorrected() -> None:
    coin = agreement(_pairs(25, 25, 27, 23))
    found = corrected_difference([([(1.0, 0.0), (0.0, 1.0)], coin, coin, True)])
    assert found.difference is None and found.problem is not None and "too poor" in found.problem


def test_self_consistency_is_the_share_of_agreeing_pairs_of_verdicts() -> None:
    assert self_consistency([(2, 2), (2, 0)]) == 1.0
    assert self_consistency([(2, 1)]) == 0.0
    assert self_consistency([(3, 2), (2, 2)]) == pytest.approx((1 / 3 + 1) / 2)
    assert self_consistency([(1, 1)]) is None
