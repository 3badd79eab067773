"""The clustered intervals and the regression gate hold their stated error rates.

Each simulation draws whole suites afresh: per-case pass probabilities from a
super-population (so the truth is its mean), then each case's trials. Pure
Python, seeded, a few thousand suites per check.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from statistics import fmean

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from evalhydra.analysis.compare import EvalPairing, adjust_comparison, is_regression, paired_block, pooled
from evalhydra.stats.clustered import (
    CLUSTERED_T,
    CLUSTERED_WILSON,
    NEWCOMBE_MCNEMAR,
    WILSON,
    CaseDiffs,
    holm,
    paired_difference,
    pass_rate_interval,
)
from evalhydra.stats.permutation import drop_p
from evalhydra.stats.rates import wilson_interval

CASES = 30
SUITES = 2000
Draw = Callable[[random.Random], float]


def _beta(a: float, b: float) -> Draw:
    return lambda rng: rng.betavariate(a, b)


def _passes(rng: random.Random, p: float, trials: int) -> int:
    return sum(rng.random() < p for _ in range(trials))


def _histogram(rng: random.Random, draw: Draw, trials: int) -> Counter[tuple[int, int]]:
    return Counter((trials, _passes(rng, draw(rng), trials)) for _ in range(CASES))


def _coverage(draw: Draw, truth: float, trials: int, seed: int) -> tuple[float, float]:
    rng = random.Random(seed)
    hits, widths = 0, []
    for _ in range(SUITES):
        rate = pass_rate_interval(_histogram(rng, draw, trials))
        hits += rate.low <= truth <= rate.high
        widths.append(rate.high - rate.low)
    return hits / SUITES, fmean(widths)


@pytest.mark.parametrize("trials", [1, 3, 8])
@pytest.mark.parametrize(("a", "b"), [(0.5, 0.5), (4.0, 1.0), (2.0, 2.0)])
def test_pass_rate_intervals_cover_the_super_population_rate(trials: int, a: float, b: float) -> None:
    coverage, width = _coverage(_beta(a, b), a / (a + b), trials, seed=trials * 100 + int(a * 10))
    assert 0.93 <= coverage <= 0.97, (coverage, width)


@pytest.mark.parametrize(("a", "b"), [(0.5, 0.5), (4.0, 1.0), (2.0, 2.0)])
def test_five_cases_of_five_trials_still_cover(a: float, b: float) -> None:
    rng = random.Random(55 + int(a * 10))
    hits = 0
    for _ in range(SUITES):
        rate = pass_rate_interval(Counter((5, _passes(rng, rng.betavariate(a, b), 5)) for _ in range(5)))
        hits += rate.low <= a / (a + b) <= rate.high
    assert hits / SUITES >= 0.93


def test_the_issue_figures_hold_for_30_cases() -> None:
    """Beta(0.5, 0.5) cases: ≥ 90% coverage with width ≤ 0.40 at 8 trials, ≤ 0.45 at 1 trial."""
    coverage, width = _coverage(_beta(0.5, 0.5), 0.5, 8, seed=8)
    assert coverage >= 0.90 and width <= 0.40
    coverage, width = _coverage(_beta(0.5, 0.5), 0.5, 1, seed=1)
    assert coverage >= 0.90 and width <= 0.45


def test_one_trial_per_case_is_wilson_over_results() -> None:
    rate = pass_rate_interval({(1, 1): 7, (1, 0): 3})
    assert (rate.estimate, (rate.low, rate.high)) == (0.7, wilson_interval(7, 10))
    assert (rate.method, rate.n_cases, rate.n_scored) == (WILSON, 10, 10)


def test_repeated_trials_that_agree_with_their_case_are_ten_cases_of_evidence() -> None:
    """Ten cases, five always pass and five never: 80 results, but only ten cases of evidence, and
    the interval is exactly the one a single trial per case gives."""
    rate = pass_rate_interval({(8, 8): 5, (8, 0): 5})
    naive = wilson_interval(40, 80)
    assert rate.method == CLUSTERED_WILSON and rate.estimate == 0.5
    assert rate.high - rate.low > 2 * (naive[1] - naive[0])
    assert (rate.low, rate.high) == pytest.approx(wilson_interval(5, 10))


def test_the_smoke_evals_interval_does_not_widen_with_trials() -> None:
    """The README's smoke eval, two cases passing: [34.2 %, 100 %] at 1 trial and at 5."""
    one, five = pass_rate_interval({(1, 1): 2}), pass_rate_interval({(5, 5): 2})
    assert (one.low, one.high) == (five.low, five.high) == pytest.approx((0.3424, 1.0), abs=1e-4)


@settings(max_examples=300, deadline=None)
@given(outcomes=st.lists(st.tuples(st.integers(1, 10), st.integers(0, 10)), min_size=1, max_size=30),
       more=st.integers(1, 10))
def test_adding_trials_never_widens_the_interval_of_unchanged_case_outcomes(
        outcomes: list[tuple[int, int]], more: int) -> None:
    """The same per-case fractions measured with ``more`` times the trials; and cases whose every
    trial agrees against one trial each."""
    cases = [(k, min(p, k)) for k, p in outcomes]
    before = pass_rate_interval(Counter(cases))
    after = pass_rate_interval(Counter((k * more, p * more) for k, p in cases))
    assert after.high - after.low <= before.high - before.low + 1e-12
    agreeing = [(1, int(p * 2 >= k)) for k, p in cases]
    one = pass_rate_interval(Counter(agreeing))
    many = pass_rate_interval(Counter((more, p * more) for _, p in agreeing))
    assert many.high - many.low <= one.high - one.low + 1e-12


def test_cases_weigh_the_same_however_many_trials_were_scored() -> None:
    rate = pass_rate_interval({(4, 4): 1, (1, 0): 1})  # 4/4 and 0/1 (three trials errored)
    assert rate.estimate == 0.5 and rate.n_cases == 2 and rate.n_scored == 5


def test_all_passing_cases_get_a_lower_limit_set_by_the_cases() -> None:
    rate = pass_rate_interval({(8, 8): 30})
    assert rate.high == pytest.approx(1.0)
    assert rate.low == pytest.approx(wilson_interval(30, 30)[0])
    assert rate.low < wilson_interval(240, 240)[0]


def test_nothing_scored_is_no_interval() -> None:
    assert pass_rate_interval({}).method == "" and pass_rate_interval({(0, 0): 4}).n_cases == 0


# --- paired comparisons ---------------------------------------------------------


def _diffs(pairs: list[tuple[float, float]], trials: int) -> CaseDiffs:
    d = [x - b for b, x in pairs]
    moves = Counter(Fraction(x).limit_denominator(1000) - Fraction(b).limit_denominator(1000)
                    for b, x in pairs)
    del moves[Fraction(0)]
    return CaseDiffs(len(d), sum(d), sum(v * v for v in d), trials,
                     sum(b == 1 and x == 1 for b, x in pairs), sum(v > 0 for v in d),
                     sum(v < 0 for v in d), sum(b == 0 and x == 0 for b, x in pairs), trials,
                     moves=dict(moves))


def _fractions(rng: random.Random, pa: float, pb: float, trials: int) -> tuple[float, float]:
    return _passes(rng, pa, trials) / trials, _passes(rng, pb, trials) / trials


def test_the_interval_is_scipys_paired_t_and_the_test_scipys_exact_permutation_test() -> None:
    rng = random.Random(3)
    pairs = [_fractions(rng, rng.random(), rng.random() * 0.8, 5) for _ in range(14)]
    result = paired_difference(_diffs(pairs, 5))
    assert result is not None and result.method == CLUSTERED_T
    reference = stats.ttest_rel([x for _, x in pairs], [b for b, _ in pairs])
    low, high = reference.confidence_interval()
    assert (result.ci_low, result.ci_high) == (pytest.approx(low), pytest.approx(high))
    exact = stats.permutation_test(([b for b, _ in pairs], [x for _, x in pairs]),
                                   lambda b, x: fmean(x) - fmean(b), permutation_type="samples",
                                   alternative="less" if result.difference < 0 else "greater",
                                   n_resamples=math.inf)
    assert result.p_value == pytest.approx(exact.pvalue, rel=1e-9)


def test_one_trial_per_case_is_newcombes_interval_and_the_one_sided_sign_test() -> None:
    result = paired_difference(_diffs([(1, 0)] * 4 + [(1, 1)] * 20 + [(0, 0)] * 6, 1))
    assert result is not None and result.method == NEWCOMBE_MCNEMAR
    assert result.p_value == 1 / 16 and result.difference == pytest.approx(-4 / 30)  # McNemar's / 2


def test_no_spread_is_the_tests_strongest_evidence_not_a_fallback() -> None:
    two = paired_difference(_diffs([(1.0, 2 / 3)] * 2, 3))
    five = paired_difference(_diffs([(1.0, 0.0)] * 5, 5))
    assert two is not None and two.p_value == 0.25  # two cases cannot show a regression
    assert five is not None and five.p_value == 1 / 32 and five.difference == -1.0


def _block(base: list[int], cand: list[int], trials: int) -> dict[str, object]:
    pairs = [(b / trials, x / trials) for b, x in zip(base, cand, strict=True)]
    block = paired_block(EvalPairing("g", "e", diffs=_diffs(pairs, trials)))
    assert block is not None
    return block


def test_a_total_collapse_fails_the_gate_from_five_cases_and_four_say_they_cannot() -> None:
    for trials in (1, 5, 10):
        collapse = _block([trials] * 5, [0] * 5, trials)
        assert collapse["verdict"] == "regression" and collapse["p_value"] == 1 / 32
        nearly = _block([trials] * 4 + [trials - 1 if trials > 1 else trials], [0] * 5, trials)
        assert nearly["verdict"] == "regression"  # 96 % -> 0 % as well as 100 % -> 0 %
        few = _block([trials] * 4, [0] * 4, trials)
        assert few["verdict"] == "cannot reach p < 0.05 with 4 cases" and not is_regression(few)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(2, 30), trials=st.integers(1, 10))
def test_the_gate_never_weakens_as_a_drop_grows(data: st.DataObject, n: int, trials: int) -> None:
    """Lowering the candidate on any cases never raises the p-value of a drop, and a drop on every
    case flagged at one size is flagged at every larger size."""
    base = data.draw(st.lists(st.integers(0, trials), min_size=n, max_size=n))
    cand = data.draw(st.lists(st.integers(0, trials), min_size=n, max_size=n))
    lower = [max(0, c - data.draw(st.integers(0, trials))) for c in cand]
    before, after = _block(base, cand, trials), _block(base, lower, trials)
    assert drop_p(after_moves(base, lower, trials)) <= drop_p(after_moves(base, cand, trials)) + 1e-12
    if is_regression(before):
        assert is_regression(after)
    start = [max(b, 1) for b in base]
    small, large = sorted(data.draw(st.lists(st.integers(1, trials), min_size=2, max_size=2)))
    flagged_small = is_regression(_block(start, [max(0, b - small) for b in start], trials))
    flagged_large = is_regression(_block(start, [max(0, b - large) for b in start], trials))
    assert flagged_large or not flagged_small
    assert flagged_small == (n >= 5)  # every case dropped: p = 2^-n


def after_moves(base: list[int], cand: list[int], trials: int) -> dict[Fraction, int]:
    moves = Counter(Fraction(x - b, trials) for b, x in zip(base, cand, strict=True))
    del moves[Fraction(0)]
    return dict(moves)


def _gate(pairs_by_eval: list[list[tuple[float, float]]], trials: int) -> bool:
    """compare --fail-on-regression on simulated evals: Holm over the evals and the pooled test."""
    pairings = [EvalPairing("g", f"e{i}", diffs=_diffs(pairs, trials))
                for i, pairs in enumerate(pairs_by_eval)]
    rows = [{"paired": paired_block(p)} for p in pairings]
    overall = {"paired": paired_block(pooled(pairings))}
    adjust_comparison(rows, overall)
    return any(is_regression(r["paired"]) for r in [*rows, overall])


def _false_alarms(trials: int, evals: int, seed: int, suites: int = SUITES) -> float:
    """Equal models on average, different case by case (p_a, p_b drawn independently)."""
    rng = random.Random(seed)
    fired = 0
    for _ in range(suites):
        suite = [[_fractions(rng, rng.betavariate(0.5, 0.5), rng.betavariate(0.5, 0.5), trials)
                  for _ in range(CASES)] for _ in range(evals)]
        fired += _gate(suite, trials)
    return fired / suites


@pytest.mark.slow
@pytest.mark.parametrize("trials", [1, 3, 8])
def test_the_gate_rarely_fires_without_a_true_difference(trials: int) -> None:
    """A one-sided test at 5 %: false regressions at most 5 % (plus the simulation's noise)."""
    assert _false_alarms(trials, evals=1, seed=trials) <= 0.06


@pytest.mark.slow
def test_holm_keeps_the_family_wise_false_alarms_when_several_evals_gate() -> None:
    assert _false_alarms(3, evals=4, seed=44, suites=1000) <= 0.06


def _drop(rng: random.Random) -> tuple[float, float]:
    """A true 15-point mean drop that varies by case: p_a ~ U(0.3, 1), δ ~ U(0, 0.3)."""
    pa = rng.uniform(0.3, 1.0)
    return pa, pa - rng.uniform(0.0, 0.3)


@pytest.mark.parametrize("trials", [1, 3, 8])
def test_power_against_a_15_point_drop_is_within_ten_points_of_the_clustered_t_test(trials: int) -> None:
    """The reference: the case-clustered paired t-test, one-sided at 5 % like the gate."""
    rng = random.Random(15 + trials)
    ours = reference = 0
    suites = 1000
    for _ in range(suites):
        pairs = [_fractions(rng, *_drop(rng), trials) for _ in range(CASES)]
        ours += _gate([pairs], trials)
        test = stats.ttest_rel([x for _, x in pairs], [b for b, _ in pairs], alternative="less")
        reference += bool(test.pvalue < 0.05)
    assert abs(reference - ours) / suites <= 0.10, (ours, reference)


def test_holm_adjusts_step_down() -> None:
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([]) == [] and holm([0.2]) == [0.2]
