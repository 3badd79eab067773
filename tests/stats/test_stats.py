"""Tests for evalhydra.stats.rates: the seed's worked numbers and the paired extension."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from evalhydra.stats import rates as stats
from evalhydra.stats.rates import (
    Z95,
    delta_interval,
    mcnemar_exact_p,
    nearest_rank,
    newcombe_paired_interval,
    paired_bootstrap_interval,
    paired_comparison,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
)
from tests.reference.stats import flakiness, stability_verdict


def approx4(value: tuple[float, float]) -> tuple[float, float]:
    return (round(value[0], 4), round(value[1], 4))


def table_pairs(a: int, b: int, c: int, d: int) -> list[tuple[bool, bool]]:
    """(baseline, candidate) pairs: a both pass, b improved, c regressed, d both fail."""
    return [(True, True)] * a + [(False, True)] * b + [(True, False)] * c + [(False, False)] * d


# --- Wilson, nearest rank, delta (zig_eval's worked numbers) ---


def test_z95_is_the_seed_constant() -> None:
    assert Z95 == 1.959963984540054


@pytest.mark.parametrize(
    ("passed", "n", "expected"),
    [(2, 2, (0.3424, 1.0)), (1, 2, (0.0945, 0.9055)), (8, 10, (0.4902, 0.9433))],
)
def test_wilson_seed_numbers(passed: int, n: int, expected: tuple[float, float]) -> None:
    assert approx4(wilson_interval(passed, n)) == expected


def test_wilson_empty_is_zero() -> None:
    assert wilson_interval(0, 0) == (0.0, 0.0)


def test_wilson_is_clamped() -> None:
    low, high = wilson_interval(0, 3)
    assert low == pytest.approx(0.0, abs=1e-12)  # the seed's formula leaves float dust
    assert 0.0 < high < 1.0
    assert wilson_interval(3, 3)[1] == 1.0


@pytest.mark.parametrize(("passed", "n"), [(3, 2), (-1, 2), (0, -1)])
def test_wilson_rejects_bad_counts(passed: int, n: int) -> None:
    with pytest.raises(ValueError, match=r"^need 0 <= passed <= n"):
        wilson_interval(passed, n)


def test_nearest_rank_seed_numbers() -> None:
    values = sorted([40, 10, 30, 20])
    assert nearest_rank(values, 50) == 20
    assert nearest_rank(values, 95) == 40
    assert sum(values) / len(values) == 25.0


def test_nearest_rank_edges() -> None:
    assert nearest_rank([], 50) == 0
    assert nearest_rank([7], 50) == 7
    assert nearest_rank([7], 95) == 7
    assert nearest_rank(list(range(1, 21)), 95) == 19  # ceil(19.0) exactly, no float drift
    assert nearest_rank(list(range(1, 101)), 100) == 100
    assert nearest_rank([0.5, 1.5, 2.5], 2.5) == 0.5
    assert nearest_rank([0.5, 1.5, 2.5], 97.5) == 2.5


@pytest.mark.parametrize(
    ("base", "cand", "expected"),
    [((1, 2), (2, 2), (-0.5631, 0.9055)), ((8, 10), (9, 10), (-0.3475, 0.4920))],
)
def test_delta_interval_seed_numbers(
    base: tuple[int, int], cand: tuple[int, int], expected: tuple[float, float]
) -> None:
    base_ci = wilson_interval(*base)
    cand_ci = wilson_interval(*cand)
    got = delta_interval(*base_ci, *cand_ci, base[1], cand[1])
    assert approx4(got) == expected


def test_delta_interval_zero_count_and_clamp() -> None:
    assert delta_interval(0.1, 0.9, 0.2, 0.8, 0, 5) == (0.0, 0.0)
    assert delta_interval(0.1, 0.9, 0.2, 0.8, 5, 0) == (0.0, 0.0)
    assert delta_interval(1.5, 2.0, -1.5, 3.0, 1, 1) == (-1.0, 1.0)


# --- Newcombe paired interval ---


def test_newcombe_published_example() -> None:
    # Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency Tables",
    # ch. 8 (Cavo et al. 2012): Newcombe square-and-add estimate -0.0621,
    # 95% CI -0.1186 to -0.0046 for the paired table [[59, 6], [16, 80]].
    assert approx4(newcombe_paired_interval(59, 6, 16, 80)) == (-0.1186, -0.0046)


def test_paired_comparison_published_example_orientation() -> None:
    # candidate = the table's first variable, so difference = (b - c) / n
    result = paired_comparison(table_pairs(59, 6, 16, 80))
    assert round(result.difference, 4) == -0.0621
    assert approx4((result.ci_low, result.ci_high)) == (-0.1186, -0.0046)
    assert result.method == "newcombe-paired"


ALL_SMALL_TABLES = [t for t in itertools.product(range(4), repeat=4) if sum(t) > 0]


@pytest.mark.parametrize("table", ALL_SMALL_TABLES)
def test_newcombe_contains_estimate_and_stays_in_range(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    low, high = newcombe_paired_interval(a, b, c, d)
    theta = (b - c) / sum(table)
    assert -1.0 <= low <= theta <= high <= 1.0


@pytest.mark.parametrize("table", ALL_SMALL_TABLES)
def test_newcombe_swapping_discordant_cells_mirrors(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    low, high = newcombe_paired_interval(a, b, c, d)
    mirror_low, mirror_high = newcombe_paired_interval(a, c, b, d)
    assert low == pytest.approx(-mirror_high, abs=1e-12)
    assert high == pytest.approx(-mirror_low, abs=1e-12)


def test_newcombe_all_concordant_is_symmetric_around_zero() -> None:
    low, high = newcombe_paired_interval(6, 0, 0, 4)
    assert low < 0 < high
    assert low == pytest.approx(-high)
    result = paired_comparison(table_pairs(6, 0, 0, 4))
    assert result.difference == 0.0
    assert result.mcnemar_p == 1.0


def test_newcombe_all_pass_on_both_sides() -> None:
    low, high = newcombe_paired_interval(10, 0, 0, 0)
    assert low == pytest.approx(-(1 - wilson_interval(10, 10)[0]))
    assert high == pytest.approx(1 - wilson_interval(10, 10)[0])


def test_newcombe_empty_table() -> None:
    assert newcombe_paired_interval(0, 0, 0, 0) == (0.0, 0.0)


def test_newcombe_narrows_with_positive_correlation() -> None:
    # same margins, but more concordance -> narrower interval
    wide = newcombe_paired_interval(25, 25, 25, 25)
    narrow = newcombe_paired_interval(45, 5, 5, 45)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]


@pytest.mark.parametrize("table", [(40, 12, 5, 43), (20, 3, 9, 18), (70, 10, 10, 10)])
def test_newcombe_agrees_with_large_bootstrap(table: tuple[int, int, int, int]) -> None:
    newcombe = newcombe_paired_interval(*table)
    boot = paired_bootstrap_interval(*table, seed=1, n_boot=4000)
    assert newcombe[0] == pytest.approx(boot[0], abs=0.02)
    assert newcombe[1] == pytest.approx(boot[1], abs=0.02)


def test_bootstrap_is_seeded() -> None:
    first = paired_bootstrap_interval(10, 4, 2, 8, seed=7, n_boot=300)
    again = paired_bootstrap_interval(10, 4, 2, 8, seed=7, n_boot=300)
    assert first == again
    assert paired_bootstrap_interval(0, 0, 0, 0, n_boot=10) == (0.0, 0.0)
    with pytest.raises(ValueError, match=r"^n_boot must be > 0"):
        paired_bootstrap_interval(1, 1, 1, 1, n_boot=0)


# --- McNemar ---


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [(0, 5, 0.0625), (5, 0, 0.0625), (1, 1, 1.0), (2, 8, 0.109375), (0, 0, 1.0), (0, 1, 1.0)],
)
def test_mcnemar_exact_values(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact_p(b, c) == expected


def test_mcnemar_log_space_matches_exact() -> None:
    b, c = 1100, 1000
    assert b + c > stats._EXACT_MCNEMAR_LIMIT
    m = b + c
    exact = min(Fraction(1), 2 * Fraction(sum(math.comb(m, i) for i in range(c + 1)), 2**m))
    assert mcnemar_exact_p(b, c) == pytest.approx(float(exact), rel=1e-9)


def test_mcnemar_rejects_negative() -> None:
    with pytest.raises(ValueError, match=r"^discordant counts must be >= 0"):
        mcnemar_exact_p(-1, 2)


# --- paired_comparison ---


def test_paired_comparison_counts_and_rates() -> None:
    pairs = table_pairs(3, 1, 2, 4)
    result = paired_comparison(pairs)
    assert (result.n_pairs, result.both_passed, result.improved) == (10, 3, 1)
    assert (result.regressed, result.both_failed) == (2, 4)
    assert result.baseline_rate == 0.5
    assert result.candidate_rate == 0.4
    assert result.difference == pytest.approx(-0.1)
    assert result.mcnemar_p == 1.0
    assert result.boot_low is None and result.boot_high is None


def test_paired_comparison_with_bootstrap() -> None:
    result = paired_comparison(table_pairs(3, 5, 0, 2), seed=3, n_boot=500)
    assert result.boot_low is not None and result.boot_high is not None
    assert result.boot_low <= result.difference <= result.boot_high
    assert result.mcnemar_p == 0.0625


def test_paired_comparison_empty() -> None:
    result = paired_comparison([])
    assert result.n_pairs == 0
    assert (result.difference, result.ci_low, result.ci_high) == (0.0, 0.0, 0.0)
    assert result.mcnemar_p == 1.0


# --- pass@k and pass^k ---


@pytest.mark.parametrize(
    ("n", "c", "k", "at_k", "hat_k"),
    [
        (5, 2, 1, 0.4, 0.4),
        (5, 2, 2, 0.7, 0.1),
        (5, 0, 3, 0.0, 0.0),
        (5, 5, 3, 1.0, 1.0),
        (5, 4, 2, 1.0, 0.6),
        (4, 2, 4, 1.0, 0.0),
    ],
)
def test_pass_at_k_and_hat_k(n: int, c: int, k: int, at_k: float, hat_k: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(at_k, abs=1e-15)
    assert pass_hat_k(n, c, k) == pytest.approx(hat_k, abs=1e-15)


def test_pass_at_k_large_n_uses_product_and_agrees() -> None:
    n, c, k = 10_050, 37, 20
    assert n > stats._EXACT_BINOMIAL_LIMIT
    exact_at = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    exact_hat = Fraction(math.comb(c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact_at), rel=1e-12)
    assert pass_hat_k(n, c, k) == pytest.approx(float(exact_hat), rel=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 0), (5, 2, 6), (5, 6, 1)])
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match=r"^need "):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError, match=r"^need "):
        pass_hat_k(n, c, k)


# --- stability ---


@pytest.mark.parametrize(
    ("passed", "total", "verdict"),
    [(3, 3, "🟢 STABLE"), (0, 3, "🔴 BROKEN"), (1, 3, "🟡 FLAKY"), (1, 1, "🟢 STABLE")],
)
def test_stability_verdict(passed: int, total: int, verdict: str) -> None:
    assert stability_verdict(passed, total) == verdict


def test_stability_verdict_needs_a_trial() -> None:
    with pytest.raises(ValueError, match=r"^a stability verdict needs at least one trial$"):
        stability_verdict(0, 0)


def test_flakiness() -> None:
    assert flakiness(3, 3) == 0.0
    assert flakiness(0, 3) == 0.0
    assert flakiness(2, 4) == 1.0
    assert flakiness(1, 4) == 0.5
    assert flakiness(0, 0) == 0.0
