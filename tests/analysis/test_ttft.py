"""Time to first token in reports and comparisons (issue 35, item 4)."""

from __future__ import annotations

import random
import statistics

import pytest
from scipy import stats as scipy_stats

from evalhydra.analysis.ttft import median_interval


@pytest.mark.parametrize(("n", "coverage"), [(5, 1 - 2 / 32), (12, 0.95), (30, 0.95), (101, 0.95)])
def test_the_median_interval_covers_the_true_median_at_least_as_often_as_it_says(n: int,
                                                                                 coverage: float) -> None:
    """Skewed latencies (log-normal, as times are): the order-statistic interval's coverage of
    the true median, by simulation, is at least 95% (less only by simulation noise); five
    cases or fewer can only give the sample's range, which covers 1 − 2/2ⁿ."""
    rng = random.Random(n)
    true_median = 1.0  # of exp(N(0, 1))
    reps, covered = 1000, 0
    for _ in range(reps):
        sample = [rng.lognormvariate(0.0, 1.0) for _ in range(n)]
        low, high = median_interval(sample)
        covered += low <= true_median <= high
    assert covered / reps >= coverage - 2.5 * (coverage * (1 - coverage) / reps) ** 0.5


def test_the_median_interval_uses_the_binomial_ranks() -> None:
    values = list(range(1, 21))  # n = 20: P(Binomial(20, 1/2) <= 5) = 0.0207, <= 6 = 0.0577
    assert median_interval(values) == (6, 15)
    assert scipy_stats.binom.cdf(5, 20, 0.5) <= 0.025 < scipy_stats.binom.cdf(6, 20, 0.5)
    assert median_interval([3.0]) == (3.0, 3.0)  # too small for 95%: the sample's range
    assert statistics.median(values) == 10.5
