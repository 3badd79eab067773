"""Student's t distribution for whole degrees of freedom (stdlib only).

The intervals and tests of :mod:`evalhydra.stats.clustered` need the t CDF
and its quantiles with ``cases − 1`` degrees of freedom. SciPy has them, but
importing it would load NumPy and SciPy into every run that writes a report,
so this module computes them exactly for whole degrees of freedom with the
finite series of Abramowitz & Stegun 26.7.3–26.7.4, and, above
:data:`_SERIES_LIMIT` degrees of freedom (where the series grows long and the
distribution is normal to many digits), with A&S 26.7.8 and the
Cornish–Fisher expansion. The tests check both against SciPy.
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["t_cdf", "t_quantile"]

#: Above this many degrees of freedom the normal-based approximations are used.
_SERIES_LIMIT = 10_000
_NORMAL = NormalDist()


def _check_df(df: int) -> None:
    if df < 1 or int(df) != df:
        raise ValueError(f"degrees of freedom must be a whole number >= 1, got {df}")


def _two_sided_mass(t: float, df: int) -> float:
    """``P(|T| <= t)`` for ``t >= 0`` (A&S 26.7.3 for odd, 26.7.4 for even ``df``)."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2:
        if df == 1:
            return 2.0 * theta / math.pi
        term = total = math.cos(theta)
        for k in range(3, df - 1, 2):  # cos θ · (1 + (2/3)cos²θ + (2·4)/(3·5)cos⁴θ + …)
            term *= cos2 * (k - 1) / k
            total += term
        return 2.0 / math.pi * (theta + math.sin(theta) * total)
    term = total = 1.0
    for k in range(2, df - 1, 2):  # 1 + (1/2)cos²θ + (1·3)/(2·4)cos⁴θ + …
        term *= cos2 * (k - 1) / k
        total += term
    return math.sin(theta) * total


def t_cdf(t: float, df: int) -> float:
    """``P(T <= t)`` for Student's t with ``df`` degrees of freedom.

    Args:
        t: The point.
        df: Whole degrees of freedom, at least 1.

    Returns:
        The cumulative probability.
    """
    _check_df(df)
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    if df > _SERIES_LIMIT:
        return _NORMAL.cdf(t * (1.0 - 1.0 / (4.0 * df)) / math.sqrt(1.0 + t * t / (2.0 * df)))
    mass = _two_sided_mass(abs(t), df)
    return 0.5 + mass / 2.0 if t >= 0 else 0.5 - mass / 2.0


def _density(t: float, df: int) -> float:
    log_c = math.lgamma((df + 1) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2.0 * math.log1p(t * t / df))


def _cornish_fisher(z: float, df: int) -> float:
    """The t quantile from the normal one, to order ``1/df²``."""
    g1 = (z**3 + z) / 4.0
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96.0
    return z + g1 / df + g2 / df**2


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom.

    Args:
        p: Probability in (0, 1).
        df: Whole degrees of freedom, at least 1.

    Returns:
        ``t`` with ``t_cdf(t, df) == p`` (Newton's method from the Cornish–Fisher start).
    """
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    t = _cornish_fisher(_NORMAL.inv_cdf(p), df)
    if df > _SERIES_LIMIT:
        return t
    for _ in range(50):
        step = (t_cdf(t, df) - p) / _density(t, df)
        t -= step
        if abs(step) < 1e-12 * max(1.0, abs(t)):
            break
    return t
