"""The simulator-corrected pass^k against known truth: 40 cases × 5 trials whose solve rates are
beta-distributed around p, a simulated user that breaks each conversation with chance e, and
60 audit labels allocated as the audit queue allocates them. The corrected 95 % interval must
cover the population's pass^k in at least 93 % of seeded replications wherever it is given.
(The figures for docs/uncertainty.md: ``python tests/stats/test_simulator_passk.py``.)"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from evalhydra.stats.rates import pass_hat_k
from evalhydra.stats.simulator import audit_allocation, corrected_for_simulator
from evalhydra.stats.simulator_passk import MIN_UNBROKEN_SHARE, corrected_pass_hat_k

CASES, TRIALS, LABELS = 40, 5, 60
CONCENTRATION = 4.0  # the beta of the cases' solve rates: Beta(p·4, (1 − p)·4)


def _truth(p: float, k: int) -> float:
    """E pᵏ over the cases' beta distribution."""
    a, b = p * CONCENTRATION, (1 - p) * CONCENTRATION
    return math.prod((a + r) / (a + b + r) for r in range(k))


def _run(rng: random.Random, p: float, e: float, leak: float = 0.0) -> tuple[Counter[tuple[int, int]],
                                                                            tuple[int, int, int, int]]:
    """One run and its audit: the (trials, passes) histogram and the audit's four counts. A
    broken conversation passes with chance ``leak`` (a leaked answer), else fails (a premature stop)."""
    hist: Counter[tuple[int, int]] = Counter()
    passes, failures = [], []
    for _ in range(CASES):
        rate = rng.betavariate(p * CONCENTRATION, (1 - p) * CONCENTRATION)
        passed = 0
        for _ in range(TRIALS):
            broken = rng.random() < e
            ok = rng.random() < leak if broken else rng.random() < rate
            passed += ok
            (passes if ok else failures).append(broken)
        hist[(TRIALS, passed)] += 1
    on_passes, on_failures = audit_allocation(len(passes), len(failures), LABELS)
    audit_p, audit_f = rng.sample(passes, on_passes), rng.sample(failures, on_failures)
    return hist, (on_passes, sum(audit_p), on_failures, sum(audit_f))


def _coverage(p: float, e: float, k: int, replications: int, leak: float = 0.0) -> tuple[float, float, int]:
    """(coverage of the given intervals, mean error in points, replications without an estimate)."""
    rng = random.Random(f"{p}-{e}-{k}-{leak}")
    truth, hits, errors, refused = _truth(p, k), 0, [], 0
    for _ in range(replications):
        hist, audit = _run(rng, p, e, leak)
        fixed = corrected_pass_hat_k(hist, k, *audit)
        if fixed.estimate is None:
            refused += 1
            continue
        assert fixed.low is not None and fixed.high is not None
        hits += fixed.low <= truth <= fixed.high
        errors.append(fixed.estimate - truth)
    given = replications - refused
    return hits / max(given, 1), 100 * sum(errors) / max(given, 1), refused


def test_a_faultless_audit_leaves_the_observed_pass_hat_k() -> None:
    hist = Counter({(5, 5): 10, (5, 3): 20, (5, 0): 10})
    fixed = corrected_pass_hat_k(hist, 2, 20, 0, 40, 0)
    raw = (10 * pass_hat_k(5, 5, 2) + 20 * pass_hat_k(5, 3, 2)) / 40
    assert fixed.raw == pytest.approx(raw) and fixed.estimate == pytest.approx(raw)
    assert fixed.low is not None and fixed.high is not None and fixed.low < raw < fixed.high


def test_premature_stops_divide_by_the_unbroken_share() -> None:
    hist = Counter({(4, 4): 12, (4, 2): 18, (4, 1): 10})
    fixed = corrected_pass_hat_k(hist, 3, 20, 0, 40, 10)  # a quarter of the failures broken
    q = (12 * 4 + 18 * 2 + 10) / 160
    unbroken = 1 - 0.25 * (1 - q)
    assert fixed.unbroken_share == pytest.approx(unbroken ** 3)
    assert fixed.estimate == pytest.approx(fixed.raw / unbroken ** 3)


def test_at_k_two_the_correction_agrees_with_the_pass_rates_at_one() -> None:
    """The same e and es correct pass^1 into the pass rate among unbroken conversations."""
    hist = Counter({(2, 2): 15, (2, 1): 15, (2, 0): 10})
    passes, failures = 45, 35
    rate = corrected_for_simulator(passes, failures, 20, 4, 30, 9)
    q, b1, b0 = passes / 80, 4 / 20, 9 / 30
    assert rate.estimate == pytest.approx(q * (1 - b1) / (1 - b1 * q - b0 * (1 - q)))
    fixed = corrected_pass_hat_k(hist, 2, 20, 4, 30, 9)
    e, lift = b1 * q + b0 * (1 - q), b1 * q
    assert fixed.estimate == pytest.approx((15 / 40 - 2 * lift * q + lift ** 2) / (1 - e) ** 2)


def test_too_many_breaks_give_no_estimate_but_say_why() -> None:
    hist = Counter({(5, 1): 40})
    fixed = corrected_pass_hat_k(hist, 5, 40, 0, 60, 30)
    assert fixed.estimate is None and fixed.unbroken_share is not None
    assert fixed.unbroken_share < MIN_UNBROKEN_SHARE and "report a smaller k" in (fixed.problem or "")
    assert corrected_pass_hat_k(hist, 2, 0, 0, 60, 3).problem == "audit some of each: passes and failures"
    with pytest.raises(ValueError, match="k >= 2"):
        corrected_pass_hat_k(hist, 1, 40, 0, 60, 3)


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("e", [0.1, 0.25, 0.4])
@pytest.mark.parametrize("p", [0.3, 0.6, 0.9])
def test_the_corrected_interval_covers_the_true_pass_hat_k(p: float, e: float, k: int) -> None:
    """Where estimates are given in most replications they cover at ≥ 93 %; where the audit mostly
    refuses (too many breaks for this k), the intervals it does give still miss in ≤ 7 % of runs."""
    replications = 500
    coverage, bias, refused = _coverage(p, e, k, replications)
    given = replications - refused
    if (1 - e) ** k >= 0.5:
        assert refused <= 0.05 * replications, (p, e, k, refused)
    if given >= 100:
        assert coverage >= 0.93 and abs(bias) < 1.5, (p, e, k, coverage, bias, refused)
    assert (1 - coverage) * given <= 0.07 * replications, (p, e, k, coverage, given)


def test_leaked_answers_are_taken_back_out() -> None:
    """Broken conversations that pass anyway (es > 0) inflate the raw pass^k; the correction
    removes them."""
    coverage, bias, refused = _coverage(0.5, 0.2, 2, 400, leak=1.0)
    assert refused <= 4 and coverage >= 0.93 and abs(bias) < 1.5, (coverage, bias, refused)


if __name__ == "__main__":  # the coverage table in docs/uncertainty.md
    print("k  e     p    coverage  error (points)  refused of 500")
    for k in (2, 3, 5):
        for e in (0.1, 0.25, 0.4):
            for p in (0.3, 0.6, 0.9):
                cov, err, refused = _coverage(p, e, k, 500)
                print(f"{k}  {e:<4}  {p}  {cov:.3f}     {err:+.2f}           {refused}")
