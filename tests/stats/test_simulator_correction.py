"""The simulator-corrected pass rate against known truth: a simulated user that stops early with
chance e, an agent that succeeds with chance p, 60 audit labels; the corrected 95 % interval must
cover p in at least 93 % of seeded replications in every cell of the grid, where the raw one
falls far below once e ≥ 0.25."""

from __future__ import annotations

import random

import pytest

from evalhydra.stats.rates import wilson_interval
from evalhydra.stats.simulator import audit_allocation, corrected_for_simulator

CONVERSATIONS = 200
LABELS = 60
GRID = [(e, p) for e in (0.1, 0.25, 0.4) for p in (0.3, 0.6, 0.9)]


def _replication(rng: random.Random, p: float, e: float) -> tuple[bool, bool]:
    """One run of CONVERSATIONS and its audit: (corrected covers p, raw covers p)."""
    outcomes = []
    for _ in range(CONVERSATIONS):
        broken = rng.random() < e  # a premature stop: the conversation fails, whatever the agent
        outcomes.append((rng.random() < p and not broken, broken))
    passes = [broken for passed, broken in outcomes if passed]
    failures = [broken for passed, broken in outcomes if not passed]
    on_passes, on_failures = audit_allocation(len(passes), len(failures), LABELS)
    audit_passes, audit_failures = rng.sample(passes, on_passes), rng.sample(failures, on_failures)
    fixed = corrected_for_simulator(len(passes), len(failures), on_passes, sum(audit_passes),
                                    on_failures, sum(audit_failures))
    low, high = wilson_interval(len(passes), CONVERSATIONS)
    assert fixed.low is not None and fixed.high is not None
    return fixed.low <= p <= fixed.high, low <= p <= high


def _coverage(e: float, p: float, replications: int) -> tuple[float, float]:
    rng = random.Random(f"{e}-{p}")
    hits = [_replication(rng, p, e) for _ in range(replications)]
    return sum(c for c, _ in hits) / replications, sum(r for _, r in hits) / replications


@pytest.mark.slow
@pytest.mark.parametrize(("e", "p"), GRID)
def test_the_corrected_interval_covers_the_agents_true_rate(e: float, p: float) -> None:
    corrected, raw = _coverage(e, p, 1000)
    assert corrected >= 0.93, (e, p, corrected, raw)
    if e >= 0.25:
        assert raw < 0.5, (e, p, raw)  # the raw interval measures the simulator too


def test_a_few_hundred_replications_already_cover() -> None:
    corrected, raw = _coverage(0.4, 0.6, 300)
    assert corrected >= 0.91 and raw < 0.05


def test_a_faultless_audit_changes_nothing() -> None:
    fixed = corrected_for_simulator(120, 80, 15, 0, 45, 0)
    assert fixed.estimate == pytest.approx(0.6)
    assert fixed.low is not None and fixed.high is not None and fixed.low < 0.6 < fixed.high


def test_broken_failures_are_left_out_of_the_rate() -> None:
    # 100 passes, 100 failures, half of the audited failures broken: half the failures were never the agent's
    fixed = corrected_for_simulator(100, 100, 20, 0, 40, 20)
    assert fixed.estimate == pytest.approx(100 / 150)
    assert fixed.broken_failures == 0.5 and fixed.broken_passes == 0.0


def test_broken_passes_are_not_the_agents_either() -> None:
    fixed = corrected_for_simulator(100, 100, 20, 10, 40, 0)  # leaked answers: half the passes
    assert fixed.estimate == pytest.approx(50 / 150)


def test_without_an_audit_of_each_side_nothing_is_corrected() -> None:
    fixed = corrected_for_simulator(100, 100, 0, 0, 40, 4)
    assert fixed.estimate is None and fixed.problem is not None and fixed.raw == 0.5


def test_counts_that_do_not_fit_are_refused() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        corrected_for_simulator(10, 10, 11, 0, 5, 0)


def test_the_audit_goes_to_failures_first_and_a_quarter_to_passes() -> None:
    assert audit_allocation(140, 60, 60) == (15, 45)
    assert audit_allocation(180, 20, 60) == (40, 20)
    assert audit_allocation(10, 190, 60) == (10, 50)
    assert audit_allocation(5, 5, 60) == (5, 5)


def test_an_interval_holds_its_estimate_at_the_edges() -> None:
    every_failure_broken = corrected_for_simulator(39, 21, 39, 0, 21, 21)
    assert every_failure_broken.estimate == 1.0 and every_failure_broken.high == 1.0
    assert every_failure_broken.low is not None and 0.85 < every_failure_broken.low < 1.0
    nothing_passed = corrected_for_simulator(0, 50, 0, 0, 40, 10)
    assert nothing_passed.estimate == 0.0 and nothing_passed.low == 0.0


def test_a_run_that_all_passed_still_has_an_interval_as_wide_as_its_size_allows() -> None:
    fixed = corrected_for_simulator(85, 0, 85, 0, 0, 0, raw_variance=0.0)  # clustered: 0 when all pass
    assert fixed.estimate == 1.0 and fixed.low is not None and 0.85 < fixed.low < 0.96
