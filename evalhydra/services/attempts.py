"""The attempt loop: one call's attempts, under its per-attempt timeout and deadline, through the
endpoint's gate (adaptive concurrency), with the retry policy's backoff between them and 429s
waited out (:mod:`evalhydra.services.retry` holds the policy and the classification).

Each attempt runs under a cancel scope of ``timeout_s``, or, with ``timeout_in_fn``, ``fn`` itself
raises ``trio.TooSlowError`` once ``timeout_s`` has passed since it started (the lean transport's
deadline: a cancel scope per attempt is a cell's largest fixed cost); transport errors and
timeouts raised by ``fn`` become results. ``before_attempt`` runs before each attempt, outside its
timeout. The deadline and the latency start when the first attempt starts. When the next sleep
would pass the deadline, the loop stops at once with the last failure; when the deadline ends an
attempt, that attempt is recorded as ``timeout``/``DeadlineExceeded``.

The gate is taken before each attempt and told its outcome; it holds the attempt back while the
endpoint is paused or at its limit, and ends it at once when the endpoint is silent. With
``rate_limit_timeout_s`` (> 0), a 429 is the endpoint asking to wait, not the call failing: it uses
up no attempt and is sent again (after the endpoint's pause, or a short backoff of its own) until
the endpoint has refused the call for that long; a 429 whose ``Retry-After`` is longer than that
(a spent daily quota) ends the call ``rate_limited`` at once.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

import httpx
import trio

from evalhydra.core.values import AttemptRecord, ErrorKind
from evalhydra.services.adaptive import EndpointSilent, Feedback, silent_reason
from evalhydra.services.retry import (
    DEADLINE_REASON,
    AttemptResult,
    RetryOutcome,
    RetryPolicy,
    classify_exception,
    error_name,
)

__all__ = ["RATE_LIMIT_BACKOFF_S", "AttemptGate", "feedback_of", "run_with_retries"]

T = TypeVar("T")


async def _attempt_once(
    fn: Callable[[int], Awaitable[AttemptResult[T]]], attempt: int, timeout_s: float | None,
    timeout_in_fn: bool,
) -> AttemptResult[T]:
    try:
        if timeout_in_fn or not timeout_s:
            return await fn(attempt)
        # A bare CancelScope, not fail_after: fail_after adds a second layer on top of it.
        with trio.CancelScope(deadline=trio.current_time() + timeout_s):
            return await fn(attempt)
        exc: BaseException = trio.TooSlowError()  # the scope's deadline ended the attempt
    except (httpx.TransportError, httpx.HTTPError, httpx.InvalidURL, trio.TooSlowError) as error:
        exc = error
    return AttemptResult(
        error_kind=classify_exception(exc),
        error_message=error_name(exc),
        transport=isinstance(exc, httpx.TransportError | trio.TooSlowError),
        detail=str(exc) or None,
    )


class AttemptGate(Protocol):
    """Lets attempts through to an endpoint and learns from their outcomes (adaptive concurrency)."""

    async def acquire(self) -> float:
        """Wait for a slot; return a token for :meth:`release`."""

    def release(self, sent_at: float, feedback: Feedback) -> None:
        """Give the slot back with what the attempt showed."""

    def cancel(self) -> None:
        """Give the slot back after an attempt that was cancelled."""


_ANSWERED = Feedback()  # a success without budget headers: the common case, made once


def feedback_of(result: AttemptResult[Any], retry_after_cap_s: float = math.inf) -> Feedback:
    """What an attempt tells an :class:`AttemptGate`: a 429, a 503 or a refused connection
    is the endpoint saying it is over its limit (its ``Retry-After`` capped as a retry's is)."""
    if result.status_code == 200 and result.limit_headers is None:
        return _ANSWERED
    refused = (result.status_code in (429, 503)
               or (result.error_kind is ErrorKind.CONNECT_ERROR and result.error_message == "ConnectError"))
    wait = result.retry_after_s
    return Feedback(ok=result.status_code is not None, refused=refused,
                    rate_limited=result.status_code == 429, timed_out=result.error_kind is ErrorKind.TIMEOUT,
                    retry_after_s=None if wait is None else min(wait, retry_after_cap_s),
                    headers=result.limit_headers)


#: A rate-limited attempt's own wait when the endpoint names none: this times 2^n, capped.
RATE_LIMIT_BACKOFF_S = 0.1


_RATE_LIMIT_BACKOFF_CAP_S = 5.0


#: With a ``Retry-After``, the refused request's own backoff is a floor of at most this.
_RETRY_AFTER_FLOOR_CAP_S = 1.0


async def run_with_retries(
    fn: Callable[[int], Awaitable[AttemptResult[T]]], policy: RetryPolicy, *, timeout_s: float | None,
    deadline_s: float | None = None, before_attempt: Callable[[], Awaitable[None]] | None = None,
    rng: random.Random | None = None, timeout_in_fn: bool = False,
    now: Callable[[], float] = trio.current_time, gate: AttemptGate | None = None,
    rate_limit_timeout_s: float | None = None,
) -> RetryOutcome[T]:
    """Run ``fn(attempt)`` (1-based) until it succeeds, fails for good, or time runs out.

    Args: ``policy`` the retry policy; ``timeout_s`` each attempt's bound (None or 0: none), kept
    by ``fn`` itself with ``timeout_in_fn``; ``deadline_s`` the bound on all attempts and sleeps;
    ``before_attempt`` awaited before each attempt (a rate-limit wait); ``rng`` the jitter's
    source; ``now`` the run's clock; ``gate`` the endpoint's adaptive concurrency;
    ``rate_limit_timeout_s`` how long 429s are waited out (see the module's docstring).

    Returns:
        The outcome with every attempt recorded. Cancellation from outside propagates.
    """
    attempts: _Attempts[T] = _Attempts(policy, rng or random.Random(), now, gate, timeout_s, timeout_in_fn,
                                       rate_limit_timeout_s)
    # No deadline, no scope: a cancel scope per call costs more than the rest of the loop.
    deadline_scope = trio.CancelScope() if deadline_s is not None else None
    with deadline_scope or contextlib.nullcontext():
        attempt = 0  # attempts that count against max_attempts
        while attempt < policy.max_attempts:
            attempt += 1
            if before_attempt is not None:
                await before_attempt()
            if not await attempts.make(fn, deadline_scope, deadline_s):
                break  # the endpoint is silent
            wait = attempts.rate_limited_wait()
            if wait is not None:  # a 429 to wait out: it uses up no attempt
                if wait < 0:
                    break
                attempt -= 1
                if wait > 0:
                    await trio.sleep(wait)
                continue
            delay = attempts.retry_delay(attempt)
            if delay < 0:
                break
            if delay > 0:
                await trio.sleep(delay)
    return attempts.outcome()


#: :meth:`_Attempts.rate_limited_wait` and :meth:`_Attempts.retry_delay`: stop, no retry.
_STOP = -1.0


class _Attempts(Generic[T]):
    """The state of one call's attempts: their records, the last result, the clock readings,
    the deadline, and since when the endpoint has refused the call (429s in a row)."""

    def __init__(self, policy: RetryPolicy, rng: random.Random, now: Callable[[], float],
                 gate: AttemptGate | None, timeout_s: float | None, timeout_in_fn: bool,
                 rate_limit_timeout_s: float | None) -> None:
        self.policy, self.rng, self.now, self.gate = policy, rng, now, gate
        self.timeout_s, self.timeout_in_fn = timeout_s, timeout_in_fn
        self.rate_limit_timeout_s = rate_limit_timeout_s
        self.records: list[AttemptRecord] = []
        self.last: AttemptResult[T] | None = None
        self.start = self.t0 = self.end = 0.0
        self.in_attempt = False
        self.deadline = math.inf
        self.refused_since: float | None = None  # the first 429 of the current run of them

    async def make(self, fn: Callable[[int], Awaitable[AttemptResult[T]]],
                   deadline_scope: trio.CancelScope | None, deadline_s: float | None) -> bool:
        """Make one attempt (through the gate) and record it; False when the gate says the
        endpoint is silent (then that is the call's result)."""
        gate = self.gate
        try:
            sent_at = await gate.acquire() if gate is not None else 0.0
        except EndpointSilent:  # never answered, and its probe timed out: no cell waits for it
            self.last = AttemptResult(error_kind=ErrorKind.ENDPOINT_SILENT,
                                      error_message=silent_reason(self.timeout_s))
            self.start = self.now()
            self.records.append(self.last.record(len(self.records) + 1, 0.0))
            self.t0 = self.t0 if len(self.records) > 1 else self.start
            return False
        self.start = self.now()
        if not self.records:
            self.t0 = self.start
            if deadline_scope is not None and deadline_s is not None:
                self.deadline = deadline_scope.deadline = self.t0 + deadline_s
        self.in_attempt = True
        try:
            last = await _attempt_once(fn, len(self.records) + 1, self.timeout_s, self.timeout_in_fn)
        except BaseException:
            if gate is not None:
                gate.cancel()
            raise
        self.in_attempt = False
        self.last, self.end = last, self.now()
        if gate is not None:
            gate.release(sent_at, feedback_of(last, self.policy.retry_after_cap_ms / 1000.0))
        self.records.append(last.record(len(self.records) + 1, (self.end - self.start) * 1000.0))
        return True

    def rate_limited_wait(self) -> float | None:
        """After a 429 that is the endpoint asking to wait: how long this call waits before it is
        sent again (:data:`_STOP`: a spent quota, or past the deadline); None otherwise."""
        last, end = self.last, self.end
        assert last is not None
        if not (self.rate_limit_timeout_s and last.status_code == 429):
            self.refused_since = None
            return None
        refused_since = self.refused_since = end if self.refused_since is None else self.refused_since
        if last.retry_after_s is not None and last.retry_after_s > self.rate_limit_timeout_s:
            return _STOP  # a spent quota: no retry within the bound can succeed
        if end - refused_since >= self.rate_limit_timeout_s:
            return None  # refused too long: an attempt like any other
        # the refused request's own wait: at least what it was asked (capped), and never sooner
        # than its own backoff (a provider asking for milliseconds is not stormed by every
        # refused cell at once)
        delay = min(_RATE_LIMIT_BACKOFF_CAP_S, RATE_LIMIT_BACKOFF_S * 2 ** min(len(self.records), 16))
        delay = self.rng.uniform(0.5 * delay, delay)
        if last.retry_after_s is not None:  # the floor is at most a second
            asked = min(last.retry_after_s, self.policy.retry_after_cap_ms / 1000.0)
            delay = max(min(delay, _RETRY_AFTER_FLOOR_CAP_S), asked)
        return _STOP if end + delay >= self.deadline else delay

    def retry_delay(self, attempt: int) -> float:
        """The backoff before attempt ``attempt + 1`` (:data:`_STOP`: no retry)."""
        last = self.last
        assert last is not None
        if attempt >= self.policy.max_attempts or not self.policy.retries(last):
            return _STOP
        delay = self.policy.delay_s(attempt, last.retry_after_s, self.rng)
        return _STOP if self.end + delay >= self.deadline else delay

    def outcome(self) -> RetryOutcome[T]:
        """Every attempt; an attempt the deadline ended is recorded as ``DeadlineExceeded``."""
        end = self.now()
        if self.in_attempt or self.last is None:  # the deadline ended an attempt
            self.last = AttemptResult(error_kind=ErrorKind.TIMEOUT, error_message=DEADLINE_REASON)
            self.records.append(self.last.record(len(self.records) + 1, (end - self.start) * 1000.0))
        started = self.t0 if self.records else end
        return RetryOutcome(self.last, self.records, (end - self.t0) * 1000.0, started)
