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

__all__ = ["POOR_JUDGE_MARGIN", "Agreement", "Corrected", "agreement", "cohen_kappa", "corrected_rate",
           "krippendorff_alpha"]

#: How far above 1 q̂₀ + q̂₁ must be for a correction (below it the judge is too poor to correct).
POOR_JUDGE_MARGIN = 0.1
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
    method = "Rogan-Gladen, delta-method interval (test and calibration variance)"
    q1, q0 = calibration.sensitivity, calibration.specificity
    n1, n0 = calibration.true_pos + calibration.false_neg, calibration.true_neg + calibration.false_pos
    if q1 is None or q0 is None:
        return Corrected(raw, None, None, None, method, "the labels need both passes and failures")
    youden = q0 + q1 - 1
    if youden <= POOR_JUDGE_MARGIN:
        return Corrected(raw, None, None, None, method,
                         f"the judge is too poor to correct (specificity + sensitivity = {q0 + q1:.3f},"
                         f" not above 1 + {POOR_JUDGE_MARGIN:g})")
    theta = (raw + q0 - 1) / youden
    kept = min(1.0, max(0.0, theta))
    spread = raw_variance + (1 - kept) ** 2 * q0 * (1 - q0) / n0 + kept ** 2 * q1 * (1 - q1) / n1
    variance = spread / youden ** 2
    half = Z95 * math.sqrt(max(variance, 0.0))
    return Corrected(raw, kept, max(0.0, theta - half), min(1.0, theta + half), method)
