"""An agent's pass rate corrected for its simulated user's errors, from a person's audit.

A simulated user can break a conversation (stop before the task is done, drift to another goal,
leak what it should not know, contradict its instructions): the agent's outcome then says
nothing about the agent. An audit marks a sample of transcripts "the simulator broke the task"
or not. The estimand is the agent's pass rate on conversations the simulator did not break,

    p = P(pass | not broken),

which equals its pass rate with a faultless simulator when breaks happen independently of how
the agent would have done (the assumption, written in docs/uncertainty.md). With N₁ passes and
N₀ failures observed, and b̂₁, b̂₀ the broken shares among the audited passes and failures,

    p̂ = N₁(1 − b̂₁) / (N₁(1 − b̂₁) + N₀(1 − b̂₀)).

Its 95 % interval is the delta method on the logit, logit p̂ = log q̂(1 − b̂₁) − log (1 − q̂)(1 − b̂₀)
with q̂ = N₁/N, carrying the run's uncertainty (``Var q̂``: binomial, or the run's own clustered
variance) and the audit's (``Var b̂ = b̃(1 − b̃)/(n + 2)`` with Agresti and Coull's b̃ = (k + 1)/(n + 2)),
each stratum's audit treated as a sample of the process, not of the run (no finite-population
correction: a run's N₀ failures are themselves a sample). Checked by simulation against known truth
(``tests/stats/test_simulator_correction.py``).

Audit sampling (:func:`audit_allocation`): failures first, since a simulator's errors mostly turn
would-be passes into failures, with at least a quarter of the labels on passes (errors such as a
leaked answer make passes that are not the agent's) when there are enough of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evalhydra.stats.rates import Z95

__all__ = ["SIMULATOR_METHOD", "SimulatorCorrected", "audit_allocation", "corrected_for_simulator"]

#: How a simulator-corrected rate and its interval are computed.
SIMULATOR_METHOD = ("pass rate among unbroken conversations, logit delta-method interval"
                    " (run and audit variance)")


@dataclass(frozen=True)
class SimulatorCorrected:
    """A pass rate corrected for the simulator's errors (:func:`corrected_for_simulator`)."""

    raw: float
    estimate: float | None  # None: nothing to correct from (no audit, or every conversation broken)
    low: float | None
    high: float | None
    broken_passes: float | None  # b̂₁: the audited passes' broken share
    broken_failures: float | None  # b̂₀: the audited failures' broken share
    method: str = SIMULATOR_METHOD
    problem: str | None = None


def audit_allocation(passes: int, failures: int, labels: int) -> tuple[int, int]:
    """How many passes and failures to audit with ``labels`` labels: every failure if they fit
    beside a quarter of the labels on passes, the rest to passes (never more than there are)."""
    on_passes = min(passes, max(math.ceil(labels / 4), labels - failures))
    on_failures = min(failures, labels - on_passes)
    return min(passes, labels - on_failures), on_failures


def corrected_for_simulator(passes: int, failures: int, audited_passes: int, broken_passes: int,
                            audited_failures: int, broken_failures: int,
                            raw_variance: float | None = None) -> SimulatorCorrected:
    """The pass rate among conversations the simulator did not break, with its 95 % interval.

    Args:
        passes: Conversations scored passed (N₁).
        failures: Conversations scored failed (N₀); infrastructure errors belong to neither.
        audited_passes: Passes a person audited (n₁).
        broken_passes: Of those, the ones marked "the simulator broke the task" (k₁).
        audited_failures: Failures audited (n₀).
        broken_failures: Of those, the ones marked broken (k₀).
        raw_variance: The variance of the raw pass rate over the run (clustered by case when
            cases ran several trials); binomial when None, and never below the binomial one of a
            rate kept half a conversation from 0 and 1.
    """
    _check(passes, failures, audited_passes, broken_passes, audited_failures, broken_failures)
    n = passes + failures
    raw = passes / n if n else 0.0
    b1 = broken_passes / audited_passes if audited_passes else None
    b0 = broken_failures / audited_failures if audited_failures else None
    if n == 0 or (b1 is None and passes) or (b0 is None and failures):
        return SimulatorCorrected(raw, None, None, None, b1, b0,
                                  problem="audit some of each: passes and failures")
    clean_passes = passes * (1 - (b1 or 0.0))
    clean_failures = failures * (1 - (b0 or 0.0))
    if clean_passes + clean_failures == 0:
        return SimulatorCorrected(raw, None, None, None, b1, b0,
                                  problem="every audited conversation was broken")
    estimate = clean_passes / (clean_passes + clean_failures)
    half = Z95 * math.sqrt(_logit_variance(raw, n, raw_variance, (audited_passes, broken_passes),
                                           (audited_failures, broken_failures)))
    centre = _logit(clean_passes, clean_failures, n)
    low = 0.0 if clean_passes == 0 else min(estimate, _expit(centre - half))  # a rate of 0 or 1: its
    high = 1.0 if clean_failures == 0 else max(estimate, _expit(centre + half))  # own bound is exact
    return SimulatorCorrected(raw, estimate, low, high, b1, b0)


def _logit_variance(raw: float, n: int, raw_variance: float | None, passes: tuple[int, int],
                    failures: tuple[int, int]) -> float:
    """Var logit p̂ by the delta method: the raw rate's term and each audit stratum's."""
    q = min(max(raw, 0.5 / n), 1 - 0.5 / n)  # a run of all passes (or none) still has a spread
    binomial = q * (1 - q) / n  # a floor: a run all passed (or failed) has a clustered variance of 0
    var_q = max(raw_variance, binomial) if raw_variance is not None else binomial
    total = var_q * (1 / q + 1 / (1 - q)) ** 2
    for audited, broken in (passes, failures):
        if audited:
            adjusted = (broken + 1) / (audited + 2)
            share = min(broken / audited, 1 - 1 / (audited + 2))  # a stratum all broken: a finite slope
            total += adjusted * (1 - adjusted) / (audited + 2) / (1 - share) ** 2
    return total


def _logit(clean_passes: float, clean_failures: float, n: int) -> float:
    floor = 0.5 / n  # a rate of exactly 0 or 1 still has an interval
    return math.log(max(clean_passes / n, floor)) - math.log(max(clean_failures / n, floor))


def _expit(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def _check(*counts: int) -> None:
    passes, failures, n1, k1, n0, k0 = counts
    if min(counts) < 0 or n1 > passes or n0 > failures or k1 > n1 or k0 > n0:
        raise ValueError(f"audit counts do not fit: {passes} passes ({n1} audited, {k1} broken), "
                         f"{failures} failures ({n0} audited, {k0} broken)")
