"""Retries: policy, backoff, ``Retry-After`` and error classification (the attempt loop is
:mod:`evalhydra.services.attempts`).

Seed behaviour (zig_eval) with the defaults:

* a status in ``retry_on_status`` is retried while ``attempt < max_attempts``;
* a transport error (connect, read, write, reset, timeout) is always retried
  while attempts remain; its final reason is the error's name, status None;
* linear backoff: sleep ``backoff_ms × attempt`` after failed attempt
  ``attempt`` (1-based), no jitter.

evalhydra adds ``strategy: exponential`` (capped exponential backoff with full
jitter), ``Retry-After`` (sleep ``max(backoff, min(retry_after, cap))``), a
per-request ``fail_after`` and an optional per-cell deadline over all attempts
and sleeps.

Classification (:func:`classify_status`, :func:`classify_exception`):

============================================  ====================  =========
cause                                         error kind            retried
============================================  ====================  =========
HTTP 429                                      ``rate_limited``      if listed
HTTP 5xx                                      ``server_error``      if listed
other non-2xx (4xx, stray 1xx/3xx)            ``client_error``      if listed
``httpx.ConnectError`` (refused, DNS, TLS),   ``connect_error``     yes
``UnsupportedProtocol``, ``ProxyError``
``ReadError``/``WriteError``/``CloseError``   ``server_error``      yes
(resets) and ``RemoteProtocolError`` (the
peer dropped or garbled the exchange)
``LocalProtocolError`` (e.g. a bad header)    ``client_error``      yes
any httpx timeout, or the request's           ``timeout``           yes
``fail_after``
the per-cell deadline                         ``timeout``           no (ends)
2xx that is not JSON, lacks                   ``invalid_response``  no
``choices[0].message``, is over 8 MiB, or
cannot be decoded
``httpx.InvalidURL`` and other request        ``client_error``      no
errors
============================================  ====================  =========

A mid-body reset is a ``server_error`` (retried) rather than
``invalid_response``: the server did not finish, it did not answer wrongly.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Generic, TypeVar

import httpx
import trio

from evalhydra.config.schema import RetryConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import AttemptRecord, ErrorKind

__all__ = [
    "DEADLINE_REASON",
    "TIMEOUT_REASON",
    "AttemptResult",
    "RetryOutcome",
    "RetryPolicy",
    "classify_exception",
    "classify_status",
    "error_name",
    "parse_retry_after",
    "retry_after_header",
]

T = TypeVar("T")

#: Reason recorded when one request exceeds ``timeout_ms``.
TIMEOUT_REASON = "Timeout"
#: Reason recorded when the per-cell ``deadline_ms`` ends an attempt.
DEADLINE_REASON = "DeadlineExceeded"

_STATUS_KINDS = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.SERVER_ERROR, ErrorKind.CLIENT_ERROR})
_STRATEGIES = ("linear", "exponential")


def classify_status(code: int) -> ErrorKind:
    """Map an HTTP status other than 200 to an error kind.

    Args:
        code: The HTTP status.

    Returns:
        ``rate_limited`` for 429, ``server_error`` for 5xx, else ``client_error`` (a 201
        or a 3xx too: zig_eval accepts only 200).
    """
    if code == 429:
        return ErrorKind.RATE_LIMITED
    if code >= 500:
        return ErrorKind.SERVER_ERROR
    return ErrorKind.CLIENT_ERROR


def classify_exception(exc: BaseException) -> ErrorKind:
    """Map an exception raised while sending a request to an error kind.

    Args:
        exc: An httpx error or :class:`trio.TooSlowError`.

    Returns:
        The kind, per the table in this module's docstring.
    """
    if isinstance(exc, trio.TooSlowError | httpx.TimeoutException):
        return ErrorKind.TIMEOUT
    if isinstance(exc, httpx.ConnectError | httpx.UnsupportedProtocol | httpx.ProxyError):
        return ErrorKind.CONNECT_ERROR
    if isinstance(exc, httpx.LocalProtocolError):
        return ErrorKind.CLIENT_ERROR
    if isinstance(exc, httpx.TransportError):
        return ErrorKind.SERVER_ERROR
    if isinstance(exc, httpx.DecodingError):
        return ErrorKind.INVALID_RESPONSE
    return ErrorKind.CLIENT_ERROR


def error_name(exc: BaseException) -> str:
    """The reason recorded for an exception: its class name (``Timeout`` for fail_after)."""
    return TIMEOUT_REASON if isinstance(exc, trio.TooSlowError) else type(exc).__name__


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Parse a ``Retry-After`` header into seconds to wait.

    Args:
        value: The header: delta-seconds (``"2"``, decimals tolerated) or an
            HTTP-date (``"Wed, 21 Oct 2015 07:28:00 GMT"``).
        now: The current Unix time for HTTP-dates (default: ``time.time()``).

    Returns:
        Seconds (never negative), or None when absent or unparseable.
    """
    if not value:
        return None
    text = value.strip()
    try:
        seconds: float | None = float(text)
    except ValueError:
        seconds = _http_date_delay(text, time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def retry_after_header(headers: Any) -> float | None:
    """Seconds a reply asks to wait: Azure's ``retry-after-ms`` (milliseconds), else
    ``Retry-After`` (seconds or an HTTP-date); None when it names no wait it can be read as."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    return parse_retry_after(headers.get("retry-after"))


def _http_date_delay(text: str, now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp() - now


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """A service's retry settings, validated and ready for the hot path.

    Attributes:
        max_attempts: Attempts per call, at least 1.
        backoff_ms: Linear step, or the exponential base.
        retry_on_status: Statuses retried while attempts remain.
        strategy: ``linear`` (seed) or ``exponential`` (full jitter).
        max_backoff_ms: Cap of the exponential backoff.
        retry_after_cap_ms: Cap of an honoured ``Retry-After``.
    """

    max_attempts: int = 1
    backoff_ms: int = 0
    retry_on_status: frozenset[int] = frozenset({429, 500, 502, 503, 504})
    strategy: str = "linear"
    max_backoff_ms: int = 60000
    retry_after_cap_ms: int = 60000

    @classmethod
    def from_config(cls, config: RetryConfig) -> RetryPolicy:
        """Build the policy from a ``retry`` block.

        Args:
            config: The service's retry config.

        Returns:
            The policy.

        Raises:
            EvalHydraError: For an unknown ``strategy``.
        """
        if config.strategy not in _STRATEGIES:
            raise EvalHydraError(
                f"retry.strategy {config.strategy!r} is not supported",
                f"Available: {', '.join(_STRATEGIES)}",
            )
        return cls(
            max_attempts=max(1, int(config.max_attempts)),
            backoff_ms=max(0, int(config.backoff_ms)),
            retry_on_status=frozenset(int(s) for s in config.retry_on_status),
            strategy=config.strategy,
            max_backoff_ms=max(0, int(config.max_backoff_ms)),
            retry_after_cap_ms=max(0, int(config.retry_after_cap_ms)),
        )

    def backoff_s(self, attempt: int, rng: random.Random) -> float:
        """Seconds to sleep after failed attempt ``attempt`` (1-based), before Retry-After.

        Args:
            attempt: The attempt that just failed.
            rng: Randomness for the exponential strategy's jitter.

        Returns:
            ``backoff_ms × attempt`` (linear), or a uniform draw from
            ``[0, min(max_backoff_ms, backoff_ms × 2^(attempt-1))]`` (exponential).
        """
        if self.strategy == "linear":
            return self.backoff_ms * attempt / 1000.0
        ceiling = min(self.max_backoff_ms, self.backoff_ms * 2 ** min(attempt - 1, 32))
        return rng.uniform(0.0, ceiling) / 1000.0

    def delay_s(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Seconds to sleep: ``max(backoff, min(retry_after, retry_after_cap))``.

        Args:
            attempt: The attempt that just failed.
            retry_after_s: The parsed ``Retry-After``, if any.
            rng: Randomness for the jitter.

        Returns:
            The delay.
        """
        delay = self.backoff_s(attempt, rng)
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.retry_after_cap_ms / 1000.0))
        return delay

    def retries(self, result: AttemptResult[T]) -> bool:
        """Whether ``result`` may be retried (attempts left is checked by the loop)."""
        if result.transport:
            return True
        return result.error_kind in _STATUS_KINDS and result.status_code in self.retry_on_status


@dataclass(slots=True)
class AttemptResult(Generic[T]):
    """What one attempt produced.

    Attributes:
        value: The parsed success (None on failure).
        status_code: The HTTP status, None for transport errors.
        error_kind: None on success.
        error_message: The seed reason: body ``error.message``, or an error name.
        transport: True for transport errors (always retryable).
        retry_after_s: The response's parsed ``Retry-After``.
        detail: Extra text for the attempt record (an exception's message).
    """

    value: T | None = None
    status_code: int | None = None
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    transport: bool = False
    retry_after_s: float | None = None
    detail: str | None = None
    limit_headers: dict[str, str] | None = None  # the reply's x-ratelimit-* headers, if any

    def record(self, attempt: int, latency_ms: float) -> AttemptRecord:
        """The audit row for this attempt."""
        message = self.error_message
        if self.detail and message:
            message = f"{message}: {self.detail}"
        return AttemptRecord(attempt, self.status_code, self.error_kind, latency_ms, message)


@dataclass(slots=True)
class RetryOutcome(Generic[T]):
    """All attempts of one call.

    Attributes:
        last: The final attempt's result (the call's result).
        attempts: One record per attempt made.
        latency_ms: From the first attempt's start to the end, sleeps included.
        started: When the first attempt started (the run's clock), after any wait for a slot.
    """

    last: AttemptResult[T]
    attempts: list[AttemptRecord] = field(default_factory=list)
    latency_ms: float = 0.0
    started: float = 0.0


