"""Adaptive limits against each provider's dialect (issue 46, item 2), on trio's MockClock: a
token bucket of 150 requests a second (a burst of 20) behind a 50 ms server, 3,000 cells at a
requested concurrency of 256. Every cell is scored, at the limit's pace (≤ 1.25 × its 20 s), and
the provider refuses at most 15 % of what it admits, whatever headers it sends."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from evalhydra.services.mock.settings import MockSettings
from tests.services.dialects import provider, run_cells

CELLS, RPS = 3000, 150.0


@pytest.mark.parametrize("dialect", ["openai", "anthropic", *(pytest.param(d, marks=pytest.mark.slow)
                                                               for d in ("bucket", "azure", "bare"))])
async def test_the_limits_pace_whatever_the_dialect(autojump_clock: trio.testing.MockClock,
                                                    dialect: str) -> None:
    bucket = provider(dialect, RPS)
    wall = await run_cells(bucket, CELLS)
    assert bucket.budget.admitted == CELLS
    assert wall <= 1.25 * CELLS / RPS, wall
    assert bucket.budget.refused <= 0.15 * CELLS, bucket.budget.refused


@pytest.mark.parametrize("dialect", ["openai", "bare", *(pytest.param(d, marks=pytest.mark.slow)
                                                          for d in ("bucket", "anthropic", "azure"))])
async def test_a_limit_that_drops_mid_run(autojump_clock: trio.testing.MockClock, dialect: str) -> None:
    """150 → 50 requests a second after 5 s (issue 62, item 4): the sends already waiting for their
    turn slow down with the pace, so the fall costs few refusals, and the pace follows the limit."""
    bucket = provider(dialect, RPS, rate_limit_later_rps=50, rate_limit_later_after_s=5)
    take, late = bucket.budget.take, []

    def counted(settings: MockSettings) -> tuple[bool, Any]:
        admitted, headers = take(settings)
        if not admitted and trio.current_time() >= 5:
            late.append(trio.current_time())
        return admitted, headers

    bucket.budget.take = counted  # type: ignore[method-assign]
    wall = await run_cells(bucket, 1500)
    ideal = 5 + (1500 - 5 * RPS) / 50
    assert bucket.budget.admitted == 1500
    assert wall <= 1.3 * ideal, wall
    assert bucket.budget.refused <= 0.2 * bucket.budget.admitted, bucket.budget.refused
    assert len(late) <= 75, len(late)  # a tenth of the 750 the fallen limit admits (was over 200)


async def test_no_limit_costs_nothing(autojump_clock: trio.testing.MockClock) -> None:
    """No limit: the requested concurrency from the first round trip, and no pace."""
    bucket = provider("bare", rps=0)
    wall = await run_cells(bucket, 2560, concurrency=256)
    assert bucket.budget.refused == 0
    assert bucket.most_in_flight == 256
    assert wall == pytest.approx(10 * 0.05, abs=0.01)  # ten round trips of 50 ms
