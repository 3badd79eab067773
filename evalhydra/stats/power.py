"""How many cases and trials a comparison needs: power of the case-clustered paired test.

The regression gate compares two targets with a one-sided test on per-case
differences of pass fractions (the exact sign-flip test,
:mod:`evalhydra.stats.permutation`, whose power is the paired t-test's to
within a few points: the tests check it). The
variance of one case's difference, measured with k trials per case, is

    Var(d) = τ² + w / k

where τ² is the between-case variance of the *true* per-case difference and
w the per-trial (Bernoulli) variance of both sides, ``p_a(1−p_a) + p_b(1−p_b)``
averaged over cases. More trials shrink only the second term; only more cases
shrink the first. With n cases, a drop of D points is detected at power 1−β
by the one-sided 5% test when

    D ≥ (t₀.₉₅,ₙ₋₁ + t₁₋β,ₙ₋₁) · √(Var(d) / n),

the usual normal-approximation formula with t quantiles (it matches the
noncentral-t power closely; the tests check it against SciPy). Below
:data:`MIN_CASES` no outcome reaches p < 0.05 at all (every case moving one
way gives p = 2⁻ⁿ), whatever the drop.

τ² and w come from a stored comparison (:func:`from_differences`), from one
stored target under an assumed correlation between two models' per-case
pass probabilities (:func:`from_one_target`), or from assumptions alone
(:func:`from_assumptions`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evalhydra.stats.clustered import CaseDiffs
from evalhydra.stats.student_t import t_quantile

__all__ = [
    "DEFAULT_CORRELATION",
    "DEFAULT_POWER",
    "MAX_CASES",
    "MIN_CASES",
    "VarianceModel",
    "cases_needed",
    "from_assumptions",
    "from_differences",
    "from_one_target",
    "min_detectable",
    "noise_floor",
]

DEFAULT_POWER = 0.8
#: Assumed correlation of two models' per-case pass probabilities when only one is stored.
DEFAULT_CORRELATION = 0.5
#: Most cases :func:`cases_needed` searches before answering "more than this".
MAX_CASES = 10_000_000
#: Fewest cases whose sign-flip test can reach p < 0.05 (2⁻⁵ = 0.031).
MIN_CASES = 5


@dataclass(frozen=True, slots=True)
class VarianceModel:
    """``Var(d) = between + within / trials`` of one case's paired difference.

    Attributes:
        between: τ², between-case variance of the true per-case difference.
        within: w, per-trial Bernoulli variance of both sides.
        source: How the two were obtained (shown to the user).
        separable: False when the data could not tell the two apart (one trial
            per case): ``between`` then holds all of it, so more trials are
            (cautiously) assumed not to help.
    """

    between: float
    within: float
    source: str
    separable: bool = True

    def sd(self, trials: int) -> float:
        """Standard deviation of one case's difference measured with ``trials`` trials."""
        return math.sqrt(max(0.0, self.between + self.within / trials))


def min_detectable(std_error: float, df: int, power: float = DEFAULT_POWER) -> float:
    """The smallest true drop the one-sided 5% test detects with ``power``.

    Args:
        std_error: Standard error of the mean difference.
        df: Degrees of freedom (cases − 1).
        power: Target power.

    Returns:
        The drop, as a fraction (0.05 = 5 points); ``inf`` with fewer than :data:`MIN_CASES`
        cases (``df + 1``), which no drop brings below p = 0.05.
    """
    if df + 1 < MIN_CASES:
        return math.inf
    return (t_quantile(0.95, df) + t_quantile(power, df)) * std_error


def cases_needed(sd: float, drop: float, power: float = DEFAULT_POWER) -> int:
    """Cases needed so the gate detects a true drop of ``drop`` with ``power``.

    Args:
        sd: Standard deviation of one case's paired difference (:meth:`VarianceModel.sd`).
        drop: The drop to detect, as a fraction (> 0).
        power: Target power in (0.5, 1).

    Returns:
        The smallest number of cases (at least :data:`MIN_CASES`), or ``MAX_CASES + 1`` when even
        :data:`MAX_CASES` would not do.
    """
    if drop <= 0:
        raise ValueError(f"the drop to detect must be > 0, got {drop}")
    if sd <= 0:
        return MIN_CASES

    def detectable(n: int) -> float:
        return min_detectable(sd / math.sqrt(n), n - 1, power)

    low, high = MIN_CASES, MIN_CASES
    while detectable(high) > drop:
        low, high = high, high * 2
        if high > MAX_CASES:
            return MAX_CASES + 1  # past the search: "more than MAX_CASES"
    while low < high:  # the detectable drop falls as cases are added
        mid = (low + high) // 2
        if detectable(mid) > drop:
            low = mid + 1
        else:
            high = mid
    return high


def from_differences(diffs: CaseDiffs) -> VarianceModel | None:
    """τ² and w from a stored comparison's per-case differences.

    With every case run more than once, w is estimated from each case's
    within-case spread (unbiased ``f(1−f)·k/(k−1)`` per side) and τ² is the
    observed variance of the differences less its within-case share. With one
    trial per case they cannot be told apart.

    Returns:
        The model, or None with fewer than two shared cases.
    """
    n = diffs.n_cases
    if n < 2:
        return None
    mean = diffs.sum_d / n
    observed = max(0.0, (diffs.sum_d2 - n * mean * mean) / (n - 1))
    if diffs.trials_min < 2:
        return VarianceModel(observed, 0.0, f"observed on {n} shared cases (one trial each)",
                             separable=False)
    between = max(0.0, observed - diffs.within_over_trials / n)
    return VarianceModel(between, diffs.within / n, f"observed on {n} shared cases")


def noise_floor(pass_rate: float, drop: float) -> VarianceModel:
    """The least variance a drop of ``drop`` from ``pass_rate`` brings: trial noise alone.

    Even if every case dropped by exactly the same amount (τ² = 0), each trial of both
    sides is still a coin: ``w = p(1−p) + q(1−q)`` with ``q = p − drop``.
    """
    other = min(1.0, max(0.0, pass_rate - drop))
    within = pass_rate * (1 - pass_rate) + other * (1 - other)
    return VarianceModel(0.0, within, f"trial noise alone at p={pass_rate:.3f} and {other:.3f}")


def from_one_target(hist: dict[tuple[int, int], int], drop: float,
                    correlation: float = DEFAULT_CORRELATION) -> VarianceModel | None:
    """τ² and w for comparing a stored target with a candidate ``drop`` points worse.

    The stored cases give the mean pass probability p̄ and, with several trials
    per case, the between-case variance σ² of the per-case probabilities
    (method of moments); with one trial per case σ² is assumed to be half of
    p̄(1−p̄). The candidate is assumed to have mean p̄ − drop and a case
    variance as large (within what its mean allows), correlated ``correlation``
    case by case (see :func:`from_assumptions`).

    Returns:
        The model, or None with fewer than two scored cases.
    """
    cells = [(n, c, w) for (n, c), w in hist.items() if n > 0 and w]
    cases = sum(w for _, _, w in cells)
    if cases < 2:
        return None
    mean = sum(c / n * w for n, c, w in cells) / cases
    spread = sum((c / n - mean) ** 2 * w for n, c, w in cells) / (cases - 1)
    if all(n > 1 for n, _, _ in cells):
        noise = sum(c / n * (1 - c / n) / (n - 1) * w for n, c, w in cells) / cases
        sigma2, how = min(max(0.0, spread - noise), mean * (1 - mean)), "estimated"
    else:
        sigma2, how = mean * (1 - mean) / 2, "assumed p̄(1−p̄)/2"
    source = (f"one target of {cases} cases: p̄={mean:.3f}, case variance σ²={sigma2:.4f} ({how});"
              f" assumed: the candidate {drop * 100:g} points lower, correlation ρ={correlation:g}")
    return _two_models(mean, sigma2, drop, correlation, source)


def from_assumptions(pass_rate: float, drop: float, case_sd: float | None = None,
                     correlation: float = DEFAULT_CORRELATION) -> VarianceModel:
    """τ² and w from assumptions alone.

    The baseline's per-case pass probabilities have mean ``pass_rate`` and SD
    ``case_sd``; the candidate's mean is ``drop`` lower with the same SD (capped
    at what a mean allows, √(p(1−p))), correlated ``correlation`` case by case.
    Then ``τ² = σa² + σb² − 2ρσaσb`` and ``w = pa(1−pa) − σa² + pb(1−pb) − σb²``.

    Args:
        pass_rate: Expected mean pass rate p̄ of the baseline.
        drop: How much lower the candidate's mean is.
        case_sd: SD of per-case pass probabilities (default: √(p̄(1−p̄)/2)).
        correlation: Correlation of two models' per-case probabilities.
    """
    variance = pass_rate * (1 - pass_rate)
    sigma2 = variance / 2 if case_sd is None else min(case_sd**2, variance)
    source = (f"assumed: p̄={pass_rate:g}, case SD σ={math.sqrt(sigma2):.3f}, the candidate"
              f" {drop * 100:g} points lower, correlation ρ={correlation:g}")
    return _two_models(pass_rate, sigma2, drop, correlation, source)


def _two_models(mean: float, sigma2: float, drop: float, correlation: float, source: str) -> VarianceModel:
    other = min(1.0, max(0.0, mean - drop))
    other_sigma2 = min(sigma2, other * (1 - other))
    between = sigma2 + other_sigma2 - 2 * correlation * math.sqrt(sigma2 * other_sigma2)
    within = mean * (1 - mean) - sigma2 + other * (1 - other) - other_sigma2
    return VarianceModel(max(0.0, between), max(0.0, within), source)
