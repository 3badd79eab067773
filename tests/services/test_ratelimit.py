"""Token buckets for rpm/tpm, on trio's virtual clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from evalhydra.config.schema import RateLimitConfig
from evalhydra.services.ratelimit import IMAGE_TOKEN_ESTIMATE, RateLimiter, TokenBucket, estimate_tokens


def test_estimate_tokens() -> None:
    assert estimate_tokens(0) == 0
    assert estimate_tokens(4) == 1
    assert estimate_tokens(5) == 2
    assert estimate_tokens(400, n_images=2) == 100 + 2 * IMAGE_TOKEN_ESTIMATE


def test_bucket_rejects_non_positive_capacity() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        TokenBucket(0)


async def test_rpm_60_over_120_requests_takes_a_minute(autojump_clock: trio.testing.MockClock) -> None:
    limiter = RateLimiter(rpm=60)
    done: list[float] = []

    async def one() -> None:
        await limiter.acquire()
        done.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        for _ in range(120):
            nursery.start_soon(one)
    assert len(done) == 120
    assert sum(1 for t in done if t == 0.0) == 60  # a full bucket bursts
    assert max(done) >= 59.0
    assert max(done) <= 61.0


async def test_budget_holds_over_every_window(autojump_clock: trio.testing.MockClock) -> None:
    budget = 600  # tokens per minute
    limiter = RateLimiter(tpm=budget)
    spent: list[tuple[float, int]] = []

    async def one(size: int) -> None:
        await limiter.acquire(size)
        spent.append((trio.current_time(), size))

    async with trio.open_nursery() as nursery:
        for i in range(100):
            nursery.start_soon(one, 20 + (i % 5) * 10)  # 20..60 tokens
    total = sum(size for _, size in spent)
    end = max(t for t, _ in spent)
    assert end >= (total - budget) / (budget / 60) - 1e-6
    for start, _ in spent:  # bucket bound: at most budget * (1 + w/60) in any window w
        for width in (1.0, 10.0, 60.0):
            in_window = sum(s for t, s in spent if start <= t < start + width)
            assert in_window <= budget * (1 + width / 60) + 1e-6


async def test_adjust_puts_the_bucket_in_debt(autojump_clock: trio.testing.MockClock) -> None:
    bucket = TokenBucket(60)  # 1 token per second
    await bucket.acquire(10)
    bucket.adjust(+60)  # the real usage was 60 more than charged
    assert bucket.tokens == pytest.approx(-10)
    await bucket.acquire(5)  # waits until 5 are back: 15 s
    assert trio.current_time() == pytest.approx(15.0)
    bucket.adjust(-1000)  # a refund never exceeds capacity
    assert bucket.tokens == pytest.approx(60)


async def test_oversized_request_waits_for_a_full_bucket(autojump_clock: trio.testing.MockClock) -> None:
    bucket = TokenBucket(60)
    await bucket.acquire(30)
    await bucket.acquire(200)  # more than capacity: waits for full, then goes into debt
    assert trio.current_time() == pytest.approx(30.0)
    assert bucket.tokens == pytest.approx(-140)


async def test_cancelled_wait_takes_nothing(autojump_clock: trio.testing.MockClock) -> None:
    bucket = TokenBucket(60)
    await bucket.acquire(60)
    with trio.move_on_after(10):
        await bucket.acquire(30)
    assert bucket.tokens == pytest.approx(10)


async def test_unlimited_limiter_is_a_no_op() -> None:
    limiter = RateLimiter.from_config(RateLimitConfig())
    assert not limiter.enabled
    assert not limiter.counts_tokens
    await limiter.acquire(10**9)
    limiter.adjust(5)
