"""How far a judge agrees with human labels, and a pass rate corrected for its errors.

A judge's verdicts on labelled cases give its sensitivity q̂₁ (the share of human passes it
passes) and specificity q̂₀ (the share of human failures it fails), each with a Wilson interval.
Agreement beyond chance is Cohen's κ (with the large-sample standard error of Fleiss, Cohen and
Everitt, 1969) and Krippendorff's α for nominal data (two coders, with a bootstrap interval over
units). A judge's pass rate p̂ over a test set is corrected by Rogan and Gladen's estimator

    θ̂ = (p̂ + q̂₀ − 1) / (q̂₀ + q̂₁ − 1),

whose variance (delta method) carries the test set's uncertainty and the calibration set's:

    Var θ̂ ≈ [Var p̂ + (1 − θ̂)² q̂₀(1 − q̂₀)/n₀ + θ̂² q̂₁(1 − q̂₁)/n₁] / (q̂₀ + q̂₁ − 1)²,

with n₁ and n₀ the labelled passes and failures; ``Var p̂`` is the test set's own (clustered by
case when cases have several trials). The estimate and its 95 % interval are kept in [0, 1].
When q̂₀ + q̂₁ − 1 is at most :data:`POOR_JUDGE_MARGIN` the judge is no better than a coin and
nothing is corrected. References: Rogan & Gladen (1978), Am. J. Epidemiol. 107(1):71–76; Lee et
al. (2026), arXiv 2511.21140.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from evalhydra.stats.rates import Z95, wilson_interval
from evalhydra.stats.student_t import t_cdf, t_quantile

__all__ = ["CORRECTED_METHOD", "POOR_JUDGE_MARGIN", "Agreement", "Corrected", "CorrectedDifference",
           "JudgedCases", "agreement", "cohen_kappa", "correction_problem", "corrected_difference",
           "corrected_rate", "krippendorff_alpha", "self_consistency"]

#: How far above 1 q̂₀ + q̂₁ must be for a correction (below it the judge is too poor to correct).
POOR_JUDGE_MARGIN = 0.1
#: How a corrected rate and its interval are computed (a result's ``corrected_ci_method``).
CORRECTED_METHOD = "Rogan-Gladen, delta-method interval (test and calibration variance)"
#: How a corrected difference and its interval are computed.
CORRECTED_DIFFERENCE_METHOD = "Rogan-Gladen per case, paired t, delta-method calibration variance"
#: Bootstrap resamples of Krippendorff's α interval.
ALPHA_RESAMPLES = 1000


@dataclass(frozen=True)
class Agreement:
    """A judge against human labels on the same cases (``pairs``: (human, judge) verdicts)."""

    n: int
    true_pos: int
    false_neg: int
    true_neg: int
    false_pos: int
    sensitivity: float | None
    sensitivity_ci: tuple[float, float]
    specificity: float | None
    specificity_ci: tuple[float, float]
    agreement: float
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    alpha: float | None
    alpha_ci: tuple[float, float] | None
    base_rate: float  # the share of human passes


def _confusion(pairs: Sequence[tuple[bool, bool]]) -> tuple[int, int, int, int]:
    tp = sum(1 for human, judge in pairs if human and judge)
    fn = sum(1 for human, judge in pairs if human and not judge)
    tn = sum(1 for human, judge in pairs if not human and not judge)
    return tp, fn, tn, len(pairs) - tp - fn - tn


def cohen_kappa(tp: int, fn: int, tn: int, fp: int) -> tuple[float | None, float | None]:
    """Cohen's κ of a 2×2 table and its large-sample standard error (None when undefined)."""
    n = tp + fn + tn + fp
    if n == 0:
        return None, None
    observed = (tp + tn) / n
    pass_h, pass_j = (tp + fn) / n, (tp + fp) / n
    expected = pass_h * pass_j + (1 - pass_h) * (1 - pass_j)
    if expected >= 1:
        return None, None
    kappa = (observed - expected) / (1 - expected)
    # Fleiss, Cohen & Everitt (1969): the variance of κ̂ when κ is not 0
    cells = {(1, 1): tp / n, (1, 0): fn / n, (0, 0): tn / n, (0, 1): fp / n}
    rows, cols = {1: pass_h, 0: 1 - pass_h}, {1: pass_j, 0: 1 - pass_j}
    a = sum(cells[(i, i)] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in (0, 1))
    b = (1 - kappa) ** 2 * sum(cells[(i, j)] * (cols[i] + rows[j]) ** 2
                               for i in (0, 1) for j in (0, 1) if i != j)
    c = (kappa - expected * (1 - kappa)) ** 2
    variance = max(a + b - c, 0.0) / (n * (1 - expected) ** 2)
    return kappa, math.sqrt(variance)


def krippendorff_alpha(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Krippendorff's α for nominal data, two coders, every unit coded by both (None if undefined)."""
    n = len(pairs)
    if n == 0:
        return None
    ones = sum(int(a) + int(b) for a, b in pairs)
    total = 2 * n
    disagreements = sum(1 for a, b in pairs if a != b)  # each puts (0,1) and (1,0) in the coincidences
    expected = 2 * ones * (total - ones)
    if expected == 0:
        return None
    return 1 - (total - 1) * (2 * disagreements) / expected


def _alpha_interval(pairs: Sequence[tuple[bool, bool]], resamples: int,
                    seed: int = 0) -> tuple[float, float] | None:
    if resamples < 1:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        value = krippendorff_alpha([pairs[rng.randrange(len(pairs))] for _ in pairs])
        if value is not None:
            values.append(value)
    if len(values) < resamples // 2:
        return None
    values.sort()
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


def agreement(pairs: Sequence[tuple[bool, bool]], *, resamples: int = ALPHA_RESAMPLES) -> Agreement:
    """The judge's error rates and agreement with human labels: (human, judge) verdicts per case
    (``resamples``: of α's bootstrap interval; 0 leaves it out)."""
    tp, fn, tn, fp = _confusion(pairs)
    n = len(pairs)
    kappa, kappa_se = cohen_kappa(tp, fn, tn, fp)
    alpha = krippendorff_alpha(pairs)
    return Agreement(
        n=n, true_pos=tp, false_neg=fn, true_neg=tn, false_pos=fp,
        sensitivity=tp / (tp + fn) if tp + fn else None,
        sensitivity_ci=wilson_interval(tp, tp + fn) if tp + fn else (0.0, 1.0),
        specificity=tn / (tn + fp) if tn + fp else None,
        specificity_ci=wilson_interval(tn, tn + fp) if tn + fp else (0.0, 1.0),
        agreement=(tp + tn) / n if n else 0.0,
        kappa=kappa,
        kappa_ci=(max(-1.0, kappa - Z95 * kappa_se), min(1.0, kappa + Z95 * kappa_se))
        if kappa is not None and kappa_se is not None else None,
        alpha=alpha, alpha_ci=_alpha_interval(pairs, resamples) if alpha is not None else None,
        base_rate=(tp + fn) / n if n else 0.0)


@dataclass(frozen=True)
class Corrected:
    """A judge's pass rate corrected for its errors (:func:`corrected_rate`)."""

    raw: float
    estimate: float | None  # None: the judge is too poor to correct (or not calibrated)
    low: float | None
    high: float | None
    method: str
    problem: str | None = None


def corrected_rate(raw: float, raw_variance: float, calibration: Agreement) -> Corrected:
    """The Rogan–Gladen correction of ``raw`` (the judge's pass rate, with its variance over the
    test set) by the judge's error rates on ``calibration``, with a 95 % delta-method interval."""
    method = CORRECTED_METHOD
    problem = correction_problem(calibration)
    if problem:
        return Corrected(raw, None, None, None, method, problem)
    q1, q0, v1, v0 = _error_rates(calibration)
    youden = q0 + q1 - 1
    theta = (raw + q0 - 1) / youden
    kept = _kept(theta)
    variance = raw_variance / youden ** 2 + _labels_term(kept, v0, v1, youden)
    half = Z95 * math.sqrt(max(variance, 0.0))
    return Corrected(raw, kept, max(0.0, theta - half), min(1.0, theta + half), method)


def _kept(theta: float) -> float:
    """A corrected rate within [0, 1]."""
    return min(1.0, max(0.0, theta))


def _labels_term(theta: float, v0: float, v1: float, youden: float) -> float:
    """The variance a corrected rate θ gets from its judge's error-rate estimates (delta method):
    ((1 − θ)² Var q̂₀ + θ² Var q̂₁) / (q̂₀ + q̂₁ − 1)²."""
    return ((1 - theta) ** 2 * v0 + theta ** 2 * v1) / youden ** 2


def correction_problem(calibration: Agreement) -> str | None:
    """Why a judge's verdicts cannot be corrected on this calibration, or None when they can."""
    q1, q0 = calibration.sensitivity, calibration.specificity
    if q1 is None or q0 is None:
        return "the labels need both passes and failures"
    if q0 + q1 - 1 <= POOR_JUDGE_MARGIN:
        return (f"the judge is too poor to correct (specificity + sensitivity = {q0 + q1:.3f},"
                f" not above 1 + {POOR_JUDGE_MARGIN:g})")
    return None


def _error_rates(calibration: Agreement) -> tuple[float, float, float, float]:
    """q̂₁, q̂₀ and the variances of their estimates (binomial, over labelled passes and failures)."""
    q1, q0 = calibration.sensitivity or 0.0, calibration.specificity or 0.0
    n1, n0 = calibration.true_pos + calibration.false_neg, calibration.true_neg + calibration.false_pos
    return q1, q0, q1 * (1 - q1) / max(n1, 1), q0 * (1 - q0) / max(n0, 1)


@dataclass(frozen=True)
class CorrectedDifference:
    """Candidate − baseline of judge-corrected pass rates, paired by case
    (:func:`corrected_difference`)."""

    difference: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    method: str
    problem: str | None = None


#: One eval's shared cases for :func:`corrected_difference`: each case's pass fractions
#: (baseline, candidate), the baseline's and the candidate's judge calibration, and whether the two
#: sides had the same judge.
JudgedCases = tuple[Sequence[tuple[float, float]], Agreement, Agreement, bool]


def _labels_variance(fractions: Sequence[tuple[float, float]], base: Agreement, cand: Agreement,
                     same_judge: bool) -> tuple[list[float], float]:
    """The cases' corrected differences, and the variance of their mean the error-rate estimates
    bring (delta method)."""
    qb1, qb0, vb1, vb0 = _error_rates(base)
    qc1, qc0, vc1, vc0 = _error_rates(cand)
    jb, jc = qb0 + qb1 - 1, qc0 + qc1 - 1
    n = len(fractions)
    theta_b = _kept((math.fsum(f for f, _ in fractions) / n + qb0 - 1) / jb)
    theta_c = _kept((math.fsum(f for _, f in fractions) / n + qc0 - 1) / jc)
    if same_judge:  # ∂Δ/∂q̂₀ = ∂Δ/∂q̂₁ = (θ_b − θ_c)/J
        labels = (theta_b - theta_c) ** 2 * (vb0 + vb1) / jb ** 2
    else:
        labels = _labels_term(theta_c, vc0, vc1, jc) + _labels_term(theta_b, vb0, vb1, jb)
    return [(fc + qc0 - 1) / jc - (fb + qb0 - 1) / jb for fb, fc in fractions], labels


def corrected_difference(groups: Sequence[JudgedCases]) -> CorrectedDifference:
    """Candidate − baseline of judge-corrected pass rates over the shared cases of one or more evals
    (:data:`JudgedCases` each).

    Each case's pass fractions are corrected by their side's judge, (f + q̂₀ − 1)/(q̂₀ + q̂₁ − 1); the
    mean corrected difference gets the paired variance over cases plus, by the delta method, the
    variance of each eval's error-rate estimates (one judge counted once for both sides, two judges
    as independent; evals' judges as independent). The 95 % interval uses Student's t with
    (cases − 1) degrees of freedom.
    """
    method = CORRECTED_DIFFERENCE_METHOD
    for _, base, cand, _ in groups:
        for side in (base, cand):
            problem = correction_problem(side)
            if problem:
                return CorrectedDifference(None, None, None, None, method, problem)
    total = sum(len(fractions) for fractions, *_ in groups)
    if total < 2:
        return CorrectedDifference(None, None, None, None, method, "fewer than two shared cases")
    diffs: list[float] = []
    labels = 0.0
    for fractions, base, cand, same in groups:
        if fractions:
            found, variance = _labels_variance(fractions, base, cand, same)
            diffs += found
            labels += (len(fractions) / total) ** 2 * variance
    mean = math.fsum(diffs) / total
    test = math.fsum((d - mean) ** 2 for d in diffs) / (total - 1) / total
    se = math.sqrt(max(test + labels, 0.0))
    if se == 0:
        return CorrectedDifference(mean, mean, mean, 1.0 if mean == 0 else 0.0, method)
    half = t_quantile(0.975, total - 1) * se
    p_value = 1 - t_cdf(abs(mean) / se, total - 1)  # one-sided, in the direction observed
    return CorrectedDifference(mean, mean - half, mean + half, min(1.0, max(0.0, p_value)), method)


def self_consistency(repeats: Sequence[tuple[int, int]]) -> float | None:
    """How often a judge gives the same output the same verdict again: over outputs judged several
    times (``(verdicts, passes)`` each), the mean share of their pairs of verdicts that agree."""
    shares = []
    for verdicts, passes in repeats:
        if verdicts >= 2:
            pairs = verdicts * (verdicts - 1) / 2
            same = passes * (passes - 1) / 2 + (verdicts - passes) * (verdicts - passes - 1) / 2
            shares.append(same / pairs)
    return math.fsum(shares) / len(shares) if shares else None
