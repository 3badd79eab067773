"""Per-service request and token budgets (``rate_limit.rpm`` / ``rate_limit.tpm``).

Each budget is a token bucket on trio's clock: it holds up to one minute's
budget, refills continuously at ``budget / 60`` per second, and starts full, so
a run may burst one minute's budget and then proceeds at the steady rate. Over
any window of ``w`` seconds at most ``budget * (1 + w / 60)`` is spent.

``tpm`` is charged *before* a request with an estimate (a quarter of the
payload's characters, images at a flat rate) and corrected afterwards with the
real ``usage`` through :meth:`RateLimiter.adjust`. The bucket may go into debt,
which later requests wait out. Waiters are served first come, first served.

Everything reads :func:`trio.current_time`, so tests run with
``trio.testing.MockClock(autojump_threshold=0)`` in no real time.
"""

from __future__ import annotations

import trio

from evalhydra.config.schema import RateLimitConfig

__all__ = ["IMAGE_TOKEN_ESTIMATE", "RateLimiter", "TokenBucket", "estimate_tokens"]

#: Tokens charged in advance for each image part (OpenAI's 512 px tile order).
IMAGE_TOKEN_ESTIMATE = 765
_EPSILON = 1e-9


def estimate_tokens(n_chars: int, n_images: int = 0) -> int:
    """Estimate a request's tokens: ``ceil(chars / 4)`` plus a flat rate per image.

    Args:
        n_chars: Characters of the payload, image data excluded.
        n_images: Number of image parts.

    Returns:
        The estimate.
    """
    return -(-n_chars // 4) + n_images * IMAGE_TOKEN_ESTIMATE


class TokenBucket:
    """A token bucket that refills ``capacity`` tokens every ``period`` seconds.

    Args:
        capacity: The most tokens the bucket holds (and its per-period budget).
        period: Seconds to refill from empty to full.

    Raises:
        ValueError: If ``capacity`` or ``period`` is not positive.
    """

    def __init__(self, capacity: float, period: float = 60.0) -> None:
        if capacity <= 0 or period <= 0:
            raise ValueError("capacity and period must be > 0")
        self.capacity = float(capacity)
        self.rate = self.capacity / period
        self._tokens = self.capacity
        self._stamp: float | None = None  # set on first use, inside trio
        self._lock = trio.Lock()

    @property
    def tokens(self) -> float:
        """Tokens available now (negative while in debt)."""
        self._refill()
        return self._tokens

    def _refill(self) -> None:
        now = trio.current_time()
        if self._stamp is not None:
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, n: float = 1.0) -> None:
        """Wait until ``n`` tokens are available, then take them.

        A request larger than the whole bucket waits for a full bucket and
        leaves it in debt, so the long-run rate still holds. Cancelling a wait
        takes nothing.

        Args:
            n: Tokens to take (0 or less returns at once).
        """
        if n <= 0:
            return
        need = min(float(n), self.capacity)
        async with self._lock:
            self._refill()
            while self._tokens + _EPSILON < need:
                await trio.sleep((need - self._tokens) / self.rate)
                self._refill()
            self._tokens -= n

    def adjust(self, delta: float) -> None:
        """Charge ``delta`` more tokens (or refund ``-delta``) without waiting.

        Args:
            delta: Positive to charge (may put the bucket in debt), negative to
                refund (never above capacity).
        """
        self._refill()
        self._tokens = min(self.capacity, self._tokens - delta)


class RateLimiter:
    """A service's ``rpm`` and ``tpm`` buckets; a no-op when both are unset.

    Args:
        rpm: Requests per minute, or None for no limit.
        tpm: Tokens per minute, or None for no limit.
    """

    def __init__(self, rpm: int | None = None, tpm: int | None = None) -> None:
        self.requests = TokenBucket(rpm) if rpm else None
        self.tokens = TokenBucket(tpm) if tpm else None

    @classmethod
    def from_config(cls, config: RateLimitConfig) -> RateLimiter:
        """Build the limiter for a service's ``rate_limit`` block.

        Args:
            config: The service's rate limits.

        Returns:
            The limiter.
        """
        return cls(config.rpm, config.tpm)

    @property
    def enabled(self) -> bool:
        """Whether any budget is set (callers skip all work otherwise)."""
        return self.requests is not None or self.tokens is not None

    @property
    def counts_tokens(self) -> bool:
        """Whether a ``tpm`` budget is set (callers only estimate tokens then)."""
        return self.tokens is not None

    async def acquire(self, tokens: int = 0) -> None:
        """Wait for one request and ``tokens`` tokens of budget.

        Args:
            tokens: The request's estimated tokens (ignored without ``tpm``).
        """
        if self.requests is not None:
            await self.requests.acquire(1)
        if self.tokens is not None:
            await self.tokens.acquire(tokens)

    def adjust(self, delta: int) -> None:
        """Correct the ``tpm`` charge once the real usage is known.

        Args:
            delta: Actual tokens minus the estimate charged.
        """
        if self.tokens is not None and delta:
            self.tokens.adjust(delta)
