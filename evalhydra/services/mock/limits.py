"""The mock's rate limit: a provider's request budget, as a token bucket on the run's clock.

With ``rate_limit_rps`` set, each chat request takes one token from a bucket of
``rate_limit_burst`` tokens that refills at that rate (it starts full). A request with no token
is refused with ``429``, ``Retry-After`` (``rate_limit_retry_after_s``) and an error body; every
chat reply carries OpenAI's request-budget headers (``x-ratelimit-limit-requests``,
``-remaining-requests``, ``-reset-requests``: the bucket's size, its whole tokens left, and the
time until it is full again). ``rate_limit_later_rps`` replaces the rate once
``rate_limit_later_after_s`` have passed since the first request, as a provider under load does.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import trio

from evalhydra.services.mock.settings import MockSettings
from evalhydra.services.mock.wire import Header

__all__ = ["RequestBudget"]


class RequestBudget:
    """The token bucket of :mod:`evalhydra.services.mock.limits`, read from the settings each time."""

    def __init__(self) -> None:
        self._tokens: float | None = None
        self._stamp = 0.0
        self._first: float | None = None
        self.refused = 0
        self.admitted = 0

    def reset(self) -> None:
        """Forget the bucket (a full one is made at the next request) and the counts."""
        self.__init__()  # type: ignore[misc]

    def _rate(self, settings: MockSettings, now: float) -> float:
        later = settings.rate_limit_later_rps
        if later and self._first is not None and now - self._first >= settings.rate_limit_later_after_s:
            return later
        return settings.rate_limit_rps

    def take(self, settings: MockSettings) -> tuple[bool, tuple[Header, ...]]:
        """Take a token for one chat request: (admitted, the budget headers to send)."""
        now = trio.current_time()
        burst = float(max(1, settings.rate_limit_burst))
        if self._tokens is None or self._first is None:
            self._tokens, self._stamp, self._first = burst, now, now
        rate = self._rate(settings, now)
        self._tokens = min(burst, self._tokens + (now - self._stamp) * rate)
        self._stamp = now
        admitted = self._tokens >= 1.0
        if admitted:
            self._tokens -= 1.0
            self.admitted += 1
        else:
            self.refused += 1
        full = (burst - self._tokens) / rate  # seconds until the bucket is full
        following = max(0.0, 1.0 - self._tokens) / rate  # seconds until the next token
        return admitted, _DIALECTS[settings.rate_limit_dialect](
            settings, int(burst), int(self._tokens), full, following, admitted)


def _openai_duration(seconds: float) -> bytes:
    """OpenAI's way of writing a reset: milliseconds below a second, else minutes and seconds."""
    if seconds < 1.0:
        return f"{seconds * 1000:.0f}ms".encode()
    minutes, rest = divmod(seconds, 60.0)
    return (f"{minutes:.0f}m{rest:.3g}s" if minutes else f"{rest:.3g}s").encode()


def _openai(settings: MockSettings, limit: int, left: int, full: float, following: float,
            admitted: bool) -> tuple[Header, ...]:
    headers: tuple[Header, ...] = ((b"x-ratelimit-limit-requests", b"%d" % limit),
                                   (b"x-ratelimit-remaining-requests", b"%d" % left),
                                   (b"x-ratelimit-reset-requests", _openai_duration(full)))
    if not admitted and settings.rate_limit_retry_after_s is not None:
        headers += ((b"retry-after", f"{settings.rate_limit_retry_after_s:g}".encode()),)
    return headers


def _bucket(settings: MockSettings, limit: int, left: int, full: float, following: float,
            admitted: bool) -> tuple[Header, ...]:
    headers: tuple[Header, ...] = ((b"x-ratelimit-limit-requests", b"%d" % limit),
                                   (b"x-ratelimit-remaining-requests", b"%d" % left),
                                   (b"x-ratelimit-reset-requests", _openai_duration(following)))
    if not admitted:
        headers += ((b"retry-after", b"%d" % max(1, math.ceil(following))),)
    return headers


def _anthropic(settings: MockSettings, limit: int, left: int, full: float, following: float,
               admitted: bool) -> tuple[Header, ...]:
    when = datetime.fromtimestamp(time.time() + full, UTC).isoformat(timespec="seconds")
    when = when.replace("+00:00", "Z")
    headers: tuple[Header, ...] = ((b"anthropic-ratelimit-requests-limit", b"%d" % limit),
                                   (b"anthropic-ratelimit-requests-remaining", b"%d" % left),
                                   (b"anthropic-ratelimit-requests-reset", when.encode()))
    if not admitted:
        headers += ((b"retry-after", b"%d" % max(1, math.ceil(following))),)
    return headers


def _azure(settings: MockSettings, limit: int, left: int, full: float, following: float,
           admitted: bool) -> tuple[Header, ...]:
    headers: tuple[Header, ...] = ((b"x-ratelimit-remaining-requests", b"%d" % left),)
    if not admitted:
        headers += ((b"retry-after-ms", b"%d" % max(1, math.ceil(following * 1000))),)
    return headers


def _bare(settings: MockSettings, limit: int, left: int, full: float, following: float,
          admitted: bool) -> tuple[Header, ...]:
    return ()


_DIALECTS = {"openai": _openai, "bucket": _bucket, "anthropic": _anthropic, "azure": _azure, "bare": _bare}
