"""Uncertainty when trials repeat cases: intervals and tests clustered by case.

Trials of one case are not independent coins (a case the model cannot do fails
on every trial), and the cases themselves are a sample from the many a suite
could have held. So every number here treats the *case* as the unit of
sampling (Miller, "Adding Error Bars to Evals", 2024):

* :func:`pass_rate_interval`: the pass rate is the mean over cases of each
  case's pass fraction; its 95% interval is Wilson's score interval on an
  effective sample size. One rule serves every design: the size estimated from
  the data, ``p(1−p)/Var̂(p̂)`` (``Var̂`` the between-case variance of the case
  fractions over the number of cases) with Korn and Graubard's (1998)
  degrees-of-freedom correction ``(z/t₍cases−1₎)²``, kept between the number of
  cases and the number of scored trials. The floor is not an estimate but a
  bound: no mean of n values in [0, 1] varies more than ``p(1−p)/n``, so it
  needs no small-sample correction. With one trial per case the rule is
  Wilson's interval over cells; trials that agree with their case leave it
  there, and more trials never narrow the size, so never widen the interval.
* :func:`paired_difference`: candidate minus baseline, paired at the case
  level: the mean over shared cases of the difference of the two pass
  fractions, with a paired t-interval on those per-case differences (with one
  trial per case on both sides, Newcombe's paired interval). The test is the
  exact one-sided sign-flip test on the same differences
  (:mod:`evalhydra.stats.permutation`): a regression gate asks one question,
  "is the candidate worse?", and its answer must never weaken as a drop grows.
* :func:`holm`: Holm's step-down adjustment when several tests gate at once.

Every function is pure and deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from evalhydra.stats.permutation import sign_flip_p
from evalhydra.stats.rates import (
    Z95,
    newcombe_paired_interval,
    wilson_bounds,
    wilson_interval,
)
from evalhydra.stats.student_t import t_quantile

__all__ = [
    "CLUSTERED_T",
    "CLUSTERED_WILSON",
    "NEWCOMBE_MCNEMAR",
    "SIGN_FLIP",
    "WILSON",
    "CaseDiffs",
    "PairedDifference",
    "RateInterval",
    "holm",
    "paired_difference",
    "pass_rate_interval",
    "rate_variance",
]

WILSON = "wilson"
CLUSTERED_WILSON = "case-clustered wilson"
CLUSTERED_T = "case-clustered paired t"
NEWCOMBE_MCNEMAR = "newcombe-paired"
#: The test of every paired comparison (:mod:`evalhydra.stats.permutation`).
SIGN_FLIP = "exact one-sided sign-flip"

#: Histogram of one target's cases: (scored trials, passed trials) -> number of cases.
CaseHistogram = Mapping[tuple[int, int], int]


@dataclass(frozen=True, slots=True)
class RateInterval:
    """A pass rate with its 95% interval.

    Attributes:
        estimate: Mean over cases of each case's pass fraction (cells, with one trial per case).
        low: Lower 95% limit.
        high: Upper 95% limit.
        method: :data:`WILSON` or :data:`CLUSTERED_WILSON`; ``""`` when nothing was scored.
        n_cases: Cases with at least one scored trial.
        n_scored: Scored trials over those cases.
    """

    estimate: float
    low: float
    high: float
    method: str
    n_cases: int
    n_scored: int


def _effective_size(mean: float, variance_of_mean: float, n_cases: int, n_scored: int) -> float:
    """``p(1−p)/Var̂(p̂)``, kept within [cases, scored trials].

    The floor is where every trial of a case agrees (trials add nothing); the
    ceiling where trials are as good as independent cases. A mean of exactly 0
    or 1 has no observed variance: it gets the floor, the cautious end.
    """
    if 0.0 < mean < 1.0 and variance_of_mean > 0.0:
        size = mean * (1.0 - mean) / variance_of_mean
    elif 0.0 < mean < 1.0:
        size = float(n_scored)
    else:
        size = float(n_cases)
    return min(max(size, float(n_cases)), float(n_scored))


def _cluster_size(cells: list[tuple[int, int, int]], mean: float, n_cases: int, n_scored: int) -> float:
    """The effective number of cases of a mean of per-case fractions (``cells``: scored, passed,
    cases), from the spread of those fractions (:func:`_effective_size`)."""
    spread = math.fsum((p / s - mean) ** 2 * cases for s, p, cases in cells) / (n_cases - 1)
    return _effective_size(mean, spread / n_cases, n_cases, n_scored)


def _interval_size(cells: list[tuple[int, int, int]], mean: float, n_cases: int, n_scored: int) -> float:
    """The Wilson size of a clustered mean: the estimated effective size, corrected for its
    ``cases − 1`` degrees of freedom, never below the number of cases (the bound that needs no
    estimate) nor above the scored trials."""
    estimated = _cluster_size(cells, mean, n_cases, n_scored) * (Z95 / t_quantile(0.975, n_cases - 1)) ** 2
    return min(max(estimated, float(n_cases)), float(n_scored))


def pass_rate_interval(hist: CaseHistogram) -> RateInterval:
    """A target's pass rate and 95% interval, clustered by case when a case has several trials.

    Cases without a scored trial (only infrastructure errors) are left out;
    every other case weighs the same, however many of its trials were scored.

    Args:
        hist: ``(scored trials, passed trials) -> number of cases``.

    Returns:
        The :class:`RateInterval`.
    """
    cells = [(scored, passed, cases) for (scored, passed), cases in hist.items() if scored > 0 and cases]
    n_cases = sum(cases for _, _, cases in cells)
    n_scored = sum(scored * cases for scored, _, cases in cells)
    if not n_cases:
        return RateInterval(0.0, 0.0, 0.0, "", 0, 0)
    if max(scored for scored, _, _ in cells) == 1:
        passed = sum(p * cases for _, p, cases in cells)
        low, high = wilson_interval(passed, n_scored)
        return RateInterval(passed / n_scored, low, high, WILSON, n_cases, n_scored)
    mean = math.fsum(p / s * cases for s, p, cases in cells) / n_cases
    if n_cases == 1:
        low, high = wilson_bounds(mean, 1.0)
        return RateInterval(mean, low, high, CLUSTERED_WILSON, 1, n_scored)
    low, high = wilson_bounds(mean, _interval_size(cells, mean, n_cases, n_scored))
    return RateInterval(mean, low, high, CLUSTERED_WILSON, n_cases, n_scored)


def rate_variance(hist: CaseHistogram) -> float:
    """The variance of :func:`pass_rate_interval`'s estimate: ``p(1−p)`` over the effective number of
    cases it uses (the case-clustered one when a case has several trials); 0 when nothing was scored."""
    rate = pass_rate_interval(hist)
    if not rate.n_cases:
        return 0.0
    if rate.method == WILSON or rate.n_cases == 1:
        return rate.estimate * (1 - rate.estimate) / rate.n_scored
    cells = [(s, p, c) for (s, p), c in hist.items() if s > 0 and c]
    return rate.estimate * (1 - rate.estimate) / _cluster_size(cells, rate.estimate, rate.n_cases,
                                                               rate.n_scored)


@dataclass
class CaseDiffs:
    """Sufficient statistics of the per-case differences of one comparison.

    ``d = candidate's pass fraction − baseline's`` for each case both sides scored.
    The 2×2 case table is what the one-trial method needs.

    Attributes:
        n_cases: Shared cases.
        sum_d: Sum of the differences.
        sum_d2: Sum of their squares.
        trials_max: Most scored trials of one case on either side.
        both: Cases both passed (one trial each).
        improved: Cases only the candidate passed.
        regressed: Cases only the baseline passed.
        neither: Cases neither passed.
        trials_min: Fewest scored trials of one case on either side.
        within: Sum over cases of both sides' unbiased per-trial variances
            ``f(1−f)·k/(k−1)`` (when ``trials_min`` > 1; see :mod:`evalhydra.stats.power`).
        within_over_trials: The same sum with each term divided by its trials.
        moves: Each nonzero per-case difference, exactly, with its number of cases (the
            sign-flip test's data).
    """

    n_cases: int = 0
    sum_d: float = 0.0
    sum_d2: float = 0.0
    trials_max: int = 0
    both: int = 0
    improved: int = 0
    regressed: int = 0
    neither: int = 0
    trials_min: int = 0
    within: float = 0.0
    within_over_trials: float = 0.0
    moves: dict[Fraction, int] = field(default_factory=dict)

    def add(self, other: CaseDiffs) -> None:
        """Pool another eval's cases into these (its cases are distinct clusters)."""
        if not other.n_cases:
            return
        self.trials_min = other.trials_min if not self.n_cases else min(self.trials_min, other.trials_min)
        self.trials_max = max(self.trials_max, other.trials_max)
        for name in ("n_cases", "sum_d", "sum_d2", "both", "improved", "regressed", "neither",
                     "within", "within_over_trials"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for move, count in other.moves.items():
            self.moves[move] = self.moves.get(move, 0) + count


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """Candidate − baseline, paired by case.

    Attributes:
        difference: Mean over shared cases of the per-case difference.
        ci_low: Lower 95% limit.
        ci_high: Upper 95% limit.
        p_value: One-sided p-value in the direction the cases moved (the exact sign-flip test,
            :data:`SIGN_FLIP`); 1.0 with no net move.
        method: The interval's: :data:`CLUSTERED_T` or :data:`NEWCOMBE_MCNEMAR`.
        std_error: Standard error of ``difference`` (None with one trial per case).
        df: Degrees of freedom of the t-interval (None with one trial per case).
    """

    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    method: str
    std_error: float | None = None
    df: int | None = None


def _one_trial(diffs: CaseDiffs, p_value: float) -> PairedDifference:
    a, b, c, d = diffs.both, diffs.improved, diffs.regressed, diffs.neither
    low, high = newcombe_paired_interval(a, b, c, d)
    return PairedDifference((b - c) / diffs.n_cases, low, high, p_value, NEWCOMBE_MCNEMAR)


def paired_difference(diffs: CaseDiffs) -> PairedDifference | None:
    """The case-level paired difference, its 95% interval and its one-sided test.

    The p-value is the exact sign-flip test's (:func:`~evalhydra.stats.permutation.sign_flip_p`)
    in the direction the cases moved. With no spread in the differences (every
    case moved by the same amount) the t-interval is the single observed value.

    Args:
        diffs: The per-case differences' sums and exact values.

    Returns:
        The :class:`PairedDifference`, or None with no shared case.

    Raises:
        ValueError: If cases moved but ``diffs.moves`` does not say by how much.
    """
    n = diffs.n_cases
    if n == 0:
        return None
    if not diffs.moves and abs(diffs.sum_d) > 1e-12:
        raise ValueError("the per-case differences (CaseDiffs.moves) are needed for the test")
    p_value = sign_flip_p(diffs.moves)
    if diffs.trials_max <= 1:
        return _one_trial(diffs, p_value)
    mean = diffs.sum_d / n
    if n == 1:
        return PairedDifference(mean, -1.0, 1.0, p_value, CLUSTERED_T, None, 0)
    variance = max(0.0, (diffs.sum_d2 - n * mean * mean) / (n - 1))
    se = math.sqrt(variance / n)
    if se < 1e-12:
        return PairedDifference(mean, mean, mean, p_value, CLUSTERED_T, 0.0, n - 1)
    t = t_quantile(0.975, n - 1)
    low, high = max(-1.0, mean - t * se), min(1.0, mean + t * se)
    return PairedDifference(mean, low, high, p_value, CLUSTERED_T, se, n - 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values, in the input's order.

    Rejecting every hypothesis whose adjusted p-value is below α keeps the
    chance of any false rejection among them at most α.

    Args:
        p_values: One p-value per test.

    Returns:
        The adjusted p-values (each at least its own, monotone in rank, at most 1).
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
