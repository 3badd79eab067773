"""Pure statistics for pass/fail eval results (stdlib only, no numpy).

Three families live here:

* **zig_eval's numbers, reproduced exactly**: the Wilson score interval with a
  fixed z (:data:`Z95`), nearest-rank percentiles and the seed's conservative
  "difference of two Wilson intervals" delta interval.
* **Paired comparison** of two targets run on the same cases
  (:func:`paired_comparison`): Newcombe's score interval for a difference of
  paired proportions, an optional seeded paired bootstrap, and McNemar's exact
  test on the discordant pairs.
* **Repeated-trial summaries**: the unbiased pass@k estimator, pass^k, and the
  zrb-llm-evaluator stability verdicts.

Every function is deterministic; the bootstrap takes an explicit seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "BROKEN",
    "FLAKY",
    "STABLE",
    "Z95",
    "PairedComparison",
    "delta_interval",
    "mcnemar_exact_p",
    "nearest_rank",
    "newcombe_paired_interval",
    "paired_bootstrap_interval",
    "paired_comparison",
    "pass_at_k",
    "pass_hat_k",
    "wilson_bounds",
    "wilson_interval",
]

#: The two-sided 95% normal quantile; zig_eval uses this value for every interval.
Z95 = 1.959963984540054

STABLE = "🟢 STABLE"
BROKEN = "🔴 BROKEN"
FLAKY = "🟡 FLAKY"

#: Above this many discordant pairs McNemar's tail is summed in log space.
_EXACT_MCNEMAR_LIMIT = 2000
#: Up to this many trials pass@k and pass^k use exact integer binomials.
_EXACT_BINOMIAL_LIMIT = 10_000

Num = TypeVar("Num", int, float)


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def _check_counts(passed: int, n: int) -> None:
    if n < 0 or not 0 <= passed <= n:
        raise ValueError(f"need 0 <= passed <= n, got passed={passed}, n={n}")


def wilson_interval(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a pass rate, exactly as zig_eval computes it.

    ``c = (p + z²/2n) / (1 + z²/n)``, ``m = z·√((p(1−p) + z²/4n) / n) / (1 + z²/n)``,
    and the interval ``[c − m, c + m]`` is clamped to [0, 1].

    Args:
        passed: Number of passing runs.
        n: Number of runs.
        z: Normal quantile (default: 95%).

    Returns:
        ``(low, high)``; ``(0.0, 0.0)`` when ``n`` is 0.

    Raises:
        ValueError: If ``passed`` is outside ``0..n``.
    """
    _check_counts(passed, n)
    if n == 0:
        return (0.0, 0.0)
    return wilson_bounds(passed / n, n, z)


def wilson_bounds(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a rate ``p`` observed on a (possibly fractional) sample size.

    :func:`wilson_interval` with the rate given directly; an *effective* sample
    size (see :mod:`evalhydra.stats.clustered`) need not be whole.

    Args:
        p: The observed rate in [0, 1].
        n: Sample size (> 0).
        z: Normal quantile (default: 95%).

    Returns:
        ``(low, high)`` clamped to [0, 1].
    """
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denominator
    margin = z * math.sqrt((p * (1.0 - p) + z2 / (4.0 * n)) / n) / denominator
    return (_clamp(center - margin, 0.0, 1.0), _clamp(center + margin, 0.0, 1.0))


def nearest_rank(sorted_values: Sequence[Num], p: float) -> Num:
    """Nearest-rank percentile of an ascending list (zig_eval's p50/p95).

    The index is ``min(n − 1, ceil(p·n/100) − 1)``, floored at 0.

    Args:
        sorted_values: Values in ascending order.
        p: Percentile in (0, 100].

    Returns:
        The chosen element, or ``0`` for an empty list (the JSON artifacts need
        a number, and zig_eval reports 0 for an empty group).
    """
    n = len(sorted_values)
    if n == 0:
        return 0
    # integer p: exact, as zig_eval does it; float p: round() absorbs noise
    # such as 0.07 * 100 = 7.000000000000001
    rank = (p * n + 99) // 100 if isinstance(p, int) else math.ceil(round(p * n / 100.0, 9))
    return sorted_values[max(0, min(n - 1, rank - 1))]


def delta_interval(
    base_lo: float,
    base_hi: float,
    cand_lo: float,
    cand_hi: float,
    n_base: int,
    n_cand: int,
) -> tuple[float, float]:
    """zig_eval's interval for ``candidate − baseline`` pass rates.

    It is neither Newcombe's interval nor a normal approximation: it spans from
    the candidate's low minus the baseline's high to the candidate's high minus
    the baseline's low, clamped to [−1, 1]. It is conservative (too wide).

    Args:
        base_lo: Baseline Wilson low.
        base_hi: Baseline Wilson high.
        cand_lo: Candidate Wilson low.
        cand_hi: Candidate Wilson high.
        n_base: Baseline run count.
        n_cand: Candidate run count.

    Returns:
        ``(low, high)``; ``(0.0, 0.0)`` if either count is 0.
    """
    if n_base == 0 or n_cand == 0:
        return (0.0, 0.0)
    return (_clamp(cand_lo - base_hi, -1.0, 1.0), _clamp(cand_hi - base_lo, -1.0, 1.0))


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Candidate vs baseline on the same (case, trial) pairs.

    Attributes:
        n_pairs: Number of pairs.
        baseline_rate: Baseline pass rate over the pairs.
        candidate_rate: Candidate pass rate over the pairs.
        difference: ``candidate_rate − baseline_rate``.
        ci_low: Newcombe (1998, method 10) 95% lower limit of the difference.
        ci_high: Newcombe 95% upper limit.
        mcnemar_p: Exact two-sided McNemar p-value.
        both_passed: Pairs where both passed.
        improved: Pairs where the baseline failed and the candidate passed.
        regressed: Pairs where the baseline passed and the candidate failed.
        both_failed: Pairs where both failed.
        boot_low: Paired percentile-bootstrap lower limit, or None if not run.
        boot_high: Paired percentile-bootstrap upper limit, or None if not run.
        method: Name of the primary interval method.
    """

    n_pairs: int
    baseline_rate: float
    candidate_rate: float
    difference: float
    ci_low: float
    ci_high: float
    mcnemar_p: float
    both_passed: int
    improved: int
    regressed: int
    both_failed: int
    boot_low: float | None = None
    boot_high: float | None = None
    method: str = "newcombe-paired"


def _paired_phi(a: int, b: int, c: int, d: int) -> float:
    """Newcombe's corrected correlation estimate for a paired 2×2 table.

    ``A = ad − bc``; φ is ``(A − n/2)/√(margins)`` when ``A > n/2``, 0 when
    ``0 ≤ A ≤ n/2``, ``A/√(margins)`` when ``A < 0``, and 0 if any margin is 0.
    """
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        return 0.0
    cross = a * d - b * c
    half_n = (a + b + c + d) / 2.0
    if cross > half_n:
        return (cross - half_n) / math.sqrt(margins)
    if cross >= 0:
        return 0.0
    return cross / math.sqrt(margins)


def _square_and_add(first: float, second: float, phi: float) -> float:
    return math.sqrt(max(0.0, first * first + second * second - 2.0 * phi * first * second))


def newcombe_paired_interval(a: int, b: int, c: int, d: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's score interval for a difference of paired proportions.

    Newcombe (1998), *Statistics in Medicine* 17:2635–2650, method 10: Wilson
    limits without continuity correction for each margin, combined by
    "square-and-add" with the corrected correlation φ (see
    :func:`_paired_phi`). The difference is ``p1 − p2`` with ``p1 = (a+b)/n``
    and ``p2 = (a+c)/n``.

    Args:
        a: Both succeed.
        b: First succeeds, second fails.
        c: First fails, second succeeds.
        d: Both fail.
        z: Normal quantile (default: 95%).

    Returns:
        ``(low, high)`` clamped to [−1, 1]; ``(0.0, 0.0)`` for an empty table.
    """
    n = a + b + c + d
    if n == 0:
        return (0.0, 0.0)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, z)
    l2, u2 = wilson_interval(a + c, n, z)
    phi = _paired_phi(a, b, c, d)
    theta = (b - c) / n
    low = theta - _square_and_add(p1 - l1, u2 - p2, phi)
    high = theta + _square_and_add(p2 - l2, u1 - p1, phi)
    return (_clamp(low, -1.0, 1.0), _clamp(high, -1.0, 1.0))


def mcnemar_exact_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value on the discordant counts.

    ``p = min(1, 2·P(X ≤ min(b, c)))`` with ``X ~ Binomial(b + c, 1/2)``; 1.0
    when there are no discordant pairs.

    Args:
        b: Discordant pairs of one kind (e.g. regressed).
        c: Discordant pairs of the other kind (e.g. improved).

    Returns:
        The p-value in (0, 1].
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    m, k = b + c, min(b, c)
    if m == 0:
        return 1.0
    if m <= _EXACT_MCNEMAR_LIMIT:
        tail = sum(math.comb(m, i) for i in range(k + 1)) / 2**m
    else:
        log_total = math.lgamma(m + 1) - m * math.log(2.0)
        tail = math.fsum(
            math.exp(log_total - math.lgamma(i + 1) - math.lgamma(m - i + 1)) for i in range(k + 1)
        )
    return min(1.0, 2.0 * tail)


def paired_bootstrap_interval(
    a: int, b: int, c: int, d: int, *, seed: int = 0, n_boot: int = 2000
) -> tuple[float, float]:
    """Percentile interval of ``(b − c)/n`` from resampling pairs with replacement.

    Args:
        a: Both succeed.
        b: First succeeds, second fails.
        c: First fails, second succeeds.
        d: Both fail.
        seed: Seed of the private :class:`random.Random`.
        n_boot: Number of resamples (> 0).

    Returns:
        The 2.5th and 97.5th nearest-rank percentiles; ``(0.0, 0.0)`` if n is 0.
    """
    if n_boot <= 0:
        raise ValueError(f"n_boot must be > 0, got {n_boot}")
    n = a + b + c + d
    if n == 0:
        return (0.0, 0.0)
    rng = random.Random(seed)
    cells = (0, 1, 2, 3)
    cum_weights = (a, a + b, a + b + c, n)
    diffs = []
    for _ in range(n_boot):
        draw = rng.choices(cells, cum_weights=cum_weights, k=n)
        diffs.append((draw.count(1) - draw.count(2)) / n)
    diffs.sort()
    return (nearest_rank(diffs, 2.5), nearest_rank(diffs, 97.5))


def paired_comparison(
    pairs: Sequence[tuple[bool, bool]], *, seed: int = 0, n_boot: int = 0
) -> PairedComparison:
    """Compare a candidate with a baseline on paired pass/fail outcomes.

    Args:
        pairs: ``(baseline_passed, candidate_passed)`` per shared (case, trial).
        seed: Bootstrap seed.
        n_boot: Bootstrap resamples; 0 (default) skips the bootstrap.

    Returns:
        A :class:`PairedComparison`; the difference is ``candidate − baseline``.
    """
    a = b = c = d = 0  # a both pass, b improved, c regressed, d both fail
    for base, cand in pairs:
        if base and cand:
            a += 1
        elif cand:
            b += 1
        elif base:
            c += 1
        else:
            d += 1
    n = a + b + c + d
    low, high = newcombe_paired_interval(a, b, c, d)
    boot = paired_bootstrap_interval(a, b, c, d, seed=seed, n_boot=n_boot) if n_boot else None
    return PairedComparison(
        n_pairs=n,
        baseline_rate=(a + c) / n if n else 0.0,
        candidate_rate=(a + b) / n if n else 0.0,
        difference=(b - c) / n if n else 0.0,
        ci_low=low,
        ci_high=high,
        mcnemar_p=mcnemar_exact_p(c, b),
        both_passed=a,
        improved=b,
        regressed=c,
        both_failed=d,
        boot_low=boot[0] if boot else None,
        boot_high=boot[1] if boot else None,
    )


def _check_k(n: int, c: int, k: int) -> None:
    _check_counts(c, n)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): ``1 − C(n−c, k) / C(n, k)``.

    Up to :data:`_EXACT_BINOMIAL_LIMIT` trials the ratio is formed from exact
    integers and rounded once; beyond it the product form
    ``1 − ∏_{i=n−c+1}^{n} (1 − k/i)`` avoids huge binomials.

    Args:
        n: Trials of the case.
        c: Passing trials.
        k: Sample size, ``1 <= k <= n``.

    Returns:
        The probability that at least one of k trials drawn without replacement passes.
    """
    _check_k(n, c, k)
    if n - c < k:
        return 1.0
    if n <= _EXACT_BINOMIAL_LIMIT:
        total = math.comb(n, k)
        return (total - math.comb(n - c, k)) / total
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: ``C(c, k) / C(n, k)``, the chance that k trials drawn all pass.

    Exact integers up to :data:`_EXACT_BINOMIAL_LIMIT` trials, else the product
    ``∏_{i<k} (c − i)/(n − i)``.

    Args:
        n: Trials of the case.
        c: Passing trials.
        k: Sample size, ``1 <= k <= n``.

    Returns:
        The probability that all k trials drawn without replacement pass.
    """
    _check_k(n, c, k)
    if c < k:
        return 0.0
    if n <= _EXACT_BINOMIAL_LIMIT:
        return math.comb(c, k) / math.comb(n, k)
    product = 1.0
    for i in range(k):
        product *= (c - i) / (n - i)
    return product


