"""The regression gate's test: an exact one-sided sign-flip test on per-case differences.

Fisher's paired randomization test (Fisher 1935; Good, *Permutation Tests*,
2000, §3.1). Under "no difference", which of a case's two results is the
baseline's is a coin flip, so each case's difference ``d`` is as likely
``+|d|`` as ``−|d|``. The one-sided p-value of a drop is the share of the
``2ⁿ`` sign assignments whose sum is at most the observed sum:

    p = #{s : Σ sᵢ·|dᵢ| ≤ Σ dᵢ} / 2ⁿ.

Why this test and not the paired t-test: it is exact at every suite size, it
needs no spread (every case moving by the same amount is its strongest
evidence, where the t statistic is undefined), and it is *monotone*: lowering
any case's candidate fraction never raises the p-value of a drop (for each
sign assignment, the sum on the left falls by no more than the observed sum
does). A drop on every case gets ``p = 2⁻ⁿ``, so ``n`` cases cannot show a
one-sided ``p < α`` when ``2⁻ⁿ ≥ α`` (:func:`min_p`). With one trial per case
the differences are −1, 0 or +1 and the test is the exact one-sided sign
(McNemar) test.

The count is exact: the differences are fractions of trials, so on a common
denominator they are integers, and the number of sign assignments per sum is
a coefficient of ``∏ (1 + x^mᵢ)``, multiplied out with Python's integers packed
one coefficient per slot. Past :data:`EXACT_BITS_LIMIT` (several hundred moved
cases at ten trials) the normal approximation of the same permutation distribution,
``z = Σ dᵢ / √Σ dᵢ²``, takes over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

__all__ = ["EXACT_BITS_LIMIT", "drop_p", "min_p", "rise_p", "sign_flip_p"]

#: Largest packed polynomial (slots × bits per slot) multiplied out exactly.
EXACT_BITS_LIMIT = 1 << 20

#: A case's difference (candidate − baseline pass fraction) -> how many cases moved by it.
Moves = Mapping[Fraction, int]


def min_p(n_cases: int) -> float:
    """The smallest one-sided p-value ``n_cases`` shared cases can give: every case moved one way."""
    return 0.5 ** n_cases if n_cases > 0 else 1.0


def drop_p(moves: Moves) -> float:
    """One-sided p-value of "the candidate is worse": ``P(Σ sᵢ|dᵢ| ≤ Σ dᵢ)`` over random signs.

    Args:
        moves: Each nonzero per-case difference with its number of cases (zeros may be left out:
            their signs change nothing).

    Returns:
        The p-value in (0, 1]; 1.0 when no case moved.
    """
    return _lower_tail(moves, sum((d * c for d, c in moves.items()), Fraction(0)))


def rise_p(moves: Moves) -> float:
    """One-sided p-value of "the candidate is better" (:func:`drop_p` with the signs swapped)."""
    return drop_p({-d: c for d, c in moves.items()})


def sign_flip_p(moves: Moves) -> float:
    """The one-sided p-value in the direction the cases moved on the whole (1.0 with no net move)."""
    total = sum((d * c for d, c in moves.items()), Fraction(0))
    if total == 0:
        return 1.0
    return drop_p(moves) if total < 0 else rise_p(moves)


def _magnitudes(moves: Moves) -> dict[Fraction, int]:
    out: dict[Fraction, int] = {}
    for d, count in moves.items():
        if d != 0 and count > 0:
            out[abs(d)] = out.get(abs(d), 0) + count
    return out


def _lower_tail(moves: Moves, observed: Fraction) -> float:
    mags = _magnitudes(moves)
    n = sum(mags.values())
    if n == 0:
        return 1.0
    scale = math.lcm(*(m.denominator for m in mags))
    units = {int(m * scale): c for m, c in mags.items()}
    top = sum(u * c for u, c in units.items())
    # Σ sᵢmᵢ = 2·(sum over the plus-signed cases) − top, so the tail is the number of subsets
    # of the magnitudes whose sum is at most (observed·scale + top) / 2
    threshold = math.floor((observed * scale + top) / 2)
    if threshold < 0:
        return 0.0
    if threshold >= top:
        return 1.0
    width = 8 * ((n + 8) // 8)  # bits per coefficient: counts reach 2ⁿ
    if (top + 1) * width > EXACT_BITS_LIMIT:
        return _normal_tail(moves, observed)
    return _subsets_at_most(units, threshold, width) / 2**n


def _subsets_at_most(units: Mapping[int, int], threshold: int, width: int) -> int:
    """How many sub-multisets of ``units`` (value -> count) sum to at most ``threshold``."""
    poly = 1
    for value, count in units.items():
        poly *= (1 + (1 << (value * width))) ** count
    slot = width // 8
    low = poly & ((1 << ((threshold + 1) * width)) - 1)
    data = low.to_bytes((threshold + 1) * slot, "little")
    return sum(int.from_bytes(data[i:i + slot], "little") for i in range(0, len(data), slot))


def _normal_tail(moves: Moves, observed: Fraction) -> float:
    spread = math.fsum(float(d) ** 2 * c for d, c in moves.items())
    z = float(observed) / math.sqrt(spread)
    return 0.5 * math.erfc(-z / math.sqrt(2.0))
