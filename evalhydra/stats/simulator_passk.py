"""An agent's pass^k corrected for its simulated user's errors, from a person's audit.

pass^k is the chance that k trials of a case all pass, averaged over cases: τ-bench's measure of
reliability. A simulated user that breaks a share of conversations drags it down k times over.

The model (its assumptions are in docs/uncertainty.md): the simulator breaks each conversation
with one chance e, whatever the case and whatever the agent would have done, and a broken
conversation passes with one chance s. A case the agent solves with chance pᵢ then passes a
trial with chance qᵢ = (1 − e)pᵢ + es, so pᵢ = (qᵢ − es)/(1 − e) and, expanding the k-th power,

    pass^k = E pᵢᵏ = (1 − e)⁻ᵏ Σⱼ C(k, j) (−es)ᵏ⁻ʲ E qᵢʲ,

each E qᵢʲ estimated without bias by the observed pass^j (``C(cᵢ, j)/C(nᵢ, j)`` averaged over
cases). The audit gives b̂₁ and b̂₀, the broken shares of the audited passes and failures; with q̂
the observed pass rate, es = b̂₁q̂ and e = b̂₁q̂ + b̂₀(1 − q̂). For k = 1 this is the pass rate
among unbroken conversations (:mod:`evalhydra.stats.simulator`), r̂; since (E pᵢ)ᵏ ≤ E pᵢᵏ ≤ E pᵢ,
the estimate is kept within [r̂ᵏ, r̂] (an agent that never fails an unbroken conversation has a
pass^k of 1, not a ratio's noise below it), and the interval, computed about the unprojected
estimate, is widened to hold it.

The 95 % interval is the delta method on the logit. The observed pass^j's covariance is the
larger (in its effect on the estimate) of the empirical one over cases and the one a
beta-binomial fitted to the observed pass rate and pass² implies; the second keeps the interval
honest when a few cases carry a small pass^k. The audit adds Agresti and Coull's variance per
stratum, as for the pass rate. When the audit cannot rule out that fewer than a fifth of k-trial
sets are unbroken ((1 − e)ᵏ < 0.2 at e's one-sided 95 % upper bound), the correction multiplies
the observed figure fivefold or more and the interval no longer holds its level (measured by
simulation): no estimate is given then.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from evalhydra.stats.rates import Z95, pass_hat_k

__all__ = ["PASS_HAT_K_METHOD", "CorrectedPassHatK", "corrected_pass_hat_k"]

#: How a simulator-corrected pass^k and its interval are computed.
PASS_HAT_K_METHOD = ("moment correction of the observed pass^1..k, logit delta-method interval"
                     " (case and beta-binomial variance, audit variance)")
#: No corrected pass^k when the audit cannot rule out that fewer k-trial sets than this are unbroken.
MIN_UNBROKEN_SHARE = 0.2
_Z_ONE_SIDED = 1.6449
_MOST_DISPERSION = 1e6  # a beta this concentrated is a binomial: every case alike


@dataclass(frozen=True)
class CorrectedPassHatK:
    """pass^k corrected for the simulator's errors (:func:`corrected_pass_hat_k`)."""

    k: int
    raw: float  # the observed pass^k
    estimate: float | None  # None: see ``problem``
    low: float | None
    high: float | None
    unbroken_share: float | None  # (1 − ê)^k: the expected share of k-trial sets none broken
    method: str = PASS_HAT_K_METHOD
    problem: str | None = None


def corrected_pass_hat_k(cases: Mapping[tuple[int, int], int], k: int, audited_passes: int,
                         broken_passes: int, audited_failures: int,
                         broken_failures: int) -> CorrectedPassHatK:
    """pass^k among conversations the simulator did not break, with its 95 % interval.

    Args:
        cases: How many cases ran n trials and passed c of them, by ``(n, c)``; cases with fewer
            than k trials are left out.
        k: Trials that must all pass, at least 2 (k = 1 is
            :func:`~evalhydra.stats.simulator.corrected_for_simulator`).
        audited_passes: Passes a person audited (n₁).
        broken_passes: Of those, the ones marked "the simulator broke the task" (k₁).
        audited_failures: Failures audited (n₀).
        broken_failures: Of those, the ones marked broken (k₀).
    """
    if k < 2:
        raise ValueError(f"k={k}: pass^k correction needs k >= 2")
    kept = {nc: w for nc, w in cases.items() if nc[0] >= k and w > 0}
    m = sum(kept.values())
    observed = _observed(kept, k)
    raw = observed[-1] if observed else 0.0
    problem = _audit_problem(kept, audited_passes, audited_failures)
    if m < 2 or problem:
        return CorrectedPassHatK(k, raw, None, None, None, None, problem=problem or "fewer than 2 cases")
    b1 = broken_passes / audited_passes if audited_passes else 0.0
    b0 = broken_failures / audited_failures if audited_failures else 0.0
    correct = _correction(k)
    theta = [*observed, b1, b0]
    unbroken = (1 - (b1 * observed[0] + b0 * (1 - observed[0]))) ** k
    at_worst = _unbroken_at_worst(observed[0], k, (audited_passes, broken_passes),
                                  (audited_failures, broken_failures))
    if at_worst < MIN_UNBROKEN_SHARE:
        return CorrectedPassHatK(k, raw, None, None, None, unbroken, problem=(
            f"the simulator breaks too much for pass^{k}: as few as {at_worst:.0%} of {k}-trial sets"
            f" may be unbroken (under {MIN_UNBROKEN_SHARE:.0%}); report a smaller k or audit more"))
    rate = min(max(_correction(1)([observed[0], b1, b0]), 0.0), 1.0)  # the corrected pass rate
    moment = min(max(correct(theta), 0.0), 1.0)
    estimate = min(max(moment, rate ** k), rate)  # Jensen: (E p)^k <= E p^k <= E p
    grad = _gradient(correct, theta)
    var = max(_quadratic(grad[:k], _case_covariance(kept, observed, k)),
              _quadratic(grad[:k], _beta_binomial_covariance(kept, observed, k)))
    for slope, audited, broken in ((grad[k], audited_passes, broken_passes),
                                   (grad[k + 1], audited_failures, broken_failures)):
        if audited:
            adjusted = (broken + 1) / (audited + 2)
            var += slope ** 2 * adjusted * (1 - adjusted) / (audited + 2)
    low, high = _logit_interval(moment, var, m * (min(n for n, _ in kept) // k))
    return CorrectedPassHatK(k, raw, estimate, min(low, estimate), max(high, estimate), unbroken)


def _audit_problem(cases: Mapping[tuple[int, int], int], audited_passes: int,
                   audited_failures: int) -> str | None:
    passes = sum(w * c for (_, c), w in cases.items())
    failures = sum(w * (n - c) for (n, c), w in cases.items())
    if (passes and not audited_passes) or (failures and not audited_failures):
        return "audit some of each: passes and failures"
    return None


def _unbroken_at_worst(q: float, k: int, passes: tuple[int, int], failures: tuple[int, int]) -> float:
    """(1 − e)^k at the audit's one-sided 95 % upper bound of the break rate e."""
    rate, var = 0.0, 0.0
    for weight, (audited, broken) in ((q, passes), (1 - q, failures)):
        if audited:
            adjusted = (broken + 1) / (audited + 2)
            rate += weight * broken / audited
            var += weight ** 2 * adjusted * (1 - adjusted) / (audited + 2)
    return max(1 - rate - _Z_ONE_SIDED * math.sqrt(var), 0.0) ** k


def _observed(cases: Mapping[tuple[int, int], int], k: int) -> list[float]:
    """The observed pass^1..k: each case's unbiased estimate, averaged over cases."""
    m = sum(cases.values())
    if not m:
        return []
    return [sum(w * pass_hat_k(n, c, j) for (n, c), w in cases.items()) / m for j in range(1, k + 1)]


def _correction(k: int) -> Callable[[Sequence[float]], float]:
    """pass^k as a function of (observed pass^1..k, b̂₁, b̂₀): the module docstring's formula."""
    def correct(theta: Sequence[float]) -> float:
        observed, b1, b0 = theta[:k], theta[k], theta[k + 1]
        q = observed[0]
        lift = b1 * q  # es: the share of conversations broken and passed anyway
        broken = lift + b0 * (1 - q)  # e
        moments = [1.0, *observed]
        total = sum(math.comb(k, j) * (-lift) ** (k - j) * moments[j] for j in range(k + 1))
        return total / (1 - broken) ** k if broken < 1 else math.nan
    return correct


def _gradient(f: Callable[[Sequence[float]], float], theta: Sequence[float]) -> list[float]:
    """∂f/∂θ by central differences (f is a polynomial over a power: smooth where it is used)."""
    out = []
    for i in range(len(theta)):
        step = 1e-6
        up, down = list(theta), list(theta)
        up[i] += step
        down[i] -= step
        out.append((f(up) - f(down)) / (2 * step))
    return out


def _quadratic(grad: Sequence[float], cov: Sequence[Sequence[float]]) -> float:
    return sum(gi * gj * cij for gi, row in zip(grad, cov, strict=True)
               for gj, cij in zip(grad, row, strict=True))


def _case_covariance(cases: Mapping[tuple[int, int], int], observed: Sequence[float],
                     k: int) -> list[list[float]]:
    """The covariance of the observed pass^1..k from the spread of the cases' own estimates."""
    m = sum(cases.values())
    u = {(n, c): [pass_hat_k(n, c, j) - observed[j - 1] for j in range(1, k + 1)] for n, c in cases}
    return [[sum(w * u[nc][i] * u[nc][j] for nc, w in cases.items()) / (m - 1) / m for j in range(k)]
            for i in range(k)]


def _beta_binomial_covariance(cases: Mapping[tuple[int, int], int], observed: Sequence[float],
                              k: int) -> list[list[float]]:
    """The covariance of the observed pass^1..k if cases' pass rates were beta-distributed with
    the observed mean and spread (a rate of exactly 0 or 1 kept half a trial inside)."""
    m = sum(cases.values())
    trials = sum(n * w for (n, _), w in cases.items())
    mean = min(max(observed[0], 0.5 / trials), 1 - 0.5 / trials)
    spread = max(observed[1] - observed[0] ** 2, 0.0)
    size = min(mean * (1 - mean) / spread - 1, _MOST_DISPERSION) if spread else _MOST_DISPERSION
    a, b = mean * max(size, 1e-3), (1 - mean) * max(size, 1e-3)
    cov = [[0.0] * k for _ in range(k)]
    for n in {n for n, _ in cases}:
        share = sum(w for (trials_n, _), w in cases.items() if trials_n == n) / m
        pmf = _beta_binomial(n, a, b)
        u = [[pass_hat_k(n, c, j) for j in range(1, k + 1)] for c in range(n + 1)]
        means = [sum(pmf[c] * u[c][j] for c in range(n + 1)) for j in range(k)]
        for i in range(k):
            for j in range(k):
                second = sum(pmf[c] * u[c][i] * u[c][j] for c in range(n + 1))
                cov[i][j] += share * (second - means[i] * means[j]) / m
    return cov


def _beta_binomial(n: int, a: float, b: float) -> list[float]:
    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)
    return [math.comb(n, c) * math.exp(log_beta(c + a, n - c + b) - log_beta(a, b)) for c in range(n + 1)]


def _logit_interval(estimate: float, var: float, draws: int) -> tuple[float, float]:
    """The 95 % interval on the logit, the estimate kept half a k-trial set from 0 and 1."""
    t = min(max(estimate, 0.5 / draws), 1 - 0.5 / draws)
    centre, half = math.log(t / (1 - t)), Z95 * math.sqrt(var) / (t * (1 - t))
    return min(estimate, _expit(centre - half)), max(estimate, _expit(centre + half))


def _expit(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))
