"""The t distribution of the clustered intervals agrees with SciPy's."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from evalhydra.stats.student_t import t_cdf, t_quantile

DFS = [1, 2, 3, 4, 5, 7, 10, 29, 30, 99, 1000, 9999, 10_001, 50_000]


@pytest.mark.parametrize("df", DFS)
def test_quantiles_match_scipy(df: int) -> None:
    for p in (0.001, 0.025, 0.1, 0.5, 0.6, 0.8, 0.9, 0.95, 0.975, 0.99, 0.999):
        assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-8, abs=1e-9)


@pytest.mark.parametrize("df", DFS)
def test_cdf_matches_scipy(df: int) -> None:
    for t in (-50.0, -5.0, -2.0, -0.3, 0.0, 0.5, 1.96, 3.0, 10.0, math.inf, -math.inf):
        assert t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-9)


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.5, 0), (0.5, 2.5)])
def test_bad_arguments_are_refused(p: float, df: float) -> None:
    with pytest.raises(ValueError):
        t_quantile(p, df)  # type: ignore[arg-type]
