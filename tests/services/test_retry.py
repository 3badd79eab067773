"""Retry policy, backoff, Retry-After parsing, classification and the attempt loop."""

from __future__ import annotations

import email.utils
import random

import httpx
import pytest
import trio

from evalhydra.config.schema import RetryConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import ErrorKind
from evalhydra.services.attempts import run_with_retries
from evalhydra.services.retry import (
    DEADLINE_REASON,
    TIMEOUT_REASON,
    AttemptResult,
    RetryPolicy,
    classify_exception,
    classify_status,
    error_name,
    parse_retry_after,
)

REQ = httpx.Request("POST", "http://x/v1/chat/completions")


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (429, ErrorKind.RATE_LIMITED),
        (500, ErrorKind.SERVER_ERROR),
        (503, ErrorKind.SERVER_ERROR),
        (599, ErrorKind.SERVER_ERROR),
        (400, ErrorKind.CLIENT_ERROR),
        (401, ErrorKind.CLIENT_ERROR),
        (404, ErrorKind.CLIENT_ERROR),
        (301, ErrorKind.CLIENT_ERROR),
    ],
)
def test_classify_status(code: int, kind: ErrorKind) -> None:
    assert classify_status(code) is kind


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpx.ConnectError("refused", request=REQ), ErrorKind.CONNECT_ERROR),
        (httpx.UnsupportedProtocol("no scheme", request=REQ), ErrorKind.CONNECT_ERROR),
        (httpx.ReadError("reset", request=REQ), ErrorKind.SERVER_ERROR),
        (httpx.WriteError("broken pipe", request=REQ), ErrorKind.SERVER_ERROR),
        (httpx.RemoteProtocolError("disconnected", request=REQ), ErrorKind.SERVER_ERROR),
        (httpx.LocalProtocolError("bad header", request=REQ), ErrorKind.CLIENT_ERROR),
        (httpx.ReadTimeout("slow", request=REQ), ErrorKind.TIMEOUT),
        (httpx.ConnectTimeout("slow", request=REQ), ErrorKind.TIMEOUT),
        (httpx.PoolTimeout("busy", request=REQ), ErrorKind.TIMEOUT),
        (trio.TooSlowError(), ErrorKind.TIMEOUT),
        (httpx.DecodingError("bad gzip", request=REQ), ErrorKind.INVALID_RESPONSE),
        (httpx.InvalidURL("bad"), ErrorKind.CLIENT_ERROR),
    ],
)
def test_classify_exception(exc: Exception, kind: ErrorKind) -> None:
    assert classify_exception(exc) is kind


def test_error_names() -> None:
    assert error_name(httpx.ConnectError("x")) == "ConnectError"
    assert error_name(trio.TooSlowError()) == TIMEOUT_REASON


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2", 2.0), (" 0 ", 0.0), ("1.5", 1.5), ("-3", 0.0), (None, None), ("", None)],
)
def test_parse_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


@pytest.mark.parametrize("value", ["soon", "nan", "inf", "Wed, 99 Foo 2015"])
def test_parse_retry_after_garbage(value: str) -> None:
    assert parse_retry_after(value) is None


def test_parse_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(email.utils.formatdate(now + 7, usegmt=True), now=now) == 7.0
    assert parse_retry_after(email.utils.formatdate(now - 7, usegmt=True), now=now) == 0.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:27 GMT", now=now) == 7.0


def test_policy_from_config_and_linear_backoff() -> None:
    policy = RetryPolicy.from_config(RetryConfig(max_attempts=3, backoff_ms=100))
    rng = random.Random(0)
    assert policy.retry_on_status == frozenset({429, 500, 502, 503, 504})
    assert [policy.backoff_s(a, rng) for a in (1, 2, 3)] == [0.1, 0.2, 0.3]


def test_policy_rejects_unknown_strategy() -> None:
    with pytest.raises(EvalHydraError, match="retry.strategy 'fibonacci'"):
        RetryPolicy.from_config(RetryConfig(strategy="fibonacci"))


def test_exponential_backoff_is_capped_full_jitter() -> None:
    policy = RetryPolicy(strategy="exponential", backoff_ms=100, max_backoff_ms=1000)
    rng = random.Random(42)
    for attempt, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        draws = [policy.backoff_s(attempt, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert max(draws) > ceiling * 0.8  # full jitter spans the range …
        assert min(draws) < ceiling * 0.2  # … from near zero


def test_retry_after_raises_delay_up_to_cap() -> None:
    policy = RetryPolicy(backoff_ms=100, retry_after_cap_ms=5000)
    rng = random.Random(0)
    assert policy.delay_s(1, 2.0, rng) == 2.0  # honoured
    assert policy.delay_s(1, 0.01, rng) == 0.1  # backoff wins
    assert policy.delay_s(1, 60.0, rng) == 5.0  # capped
    assert policy.delay_s(2, None, rng) == 0.2


def _scripted(results: list[AttemptResult[str] | BaseException], log: list[float]):  # type: ignore[no-untyped-def]
    async def attempt(n: int) -> AttemptResult[str]:
        log.append(trio.current_time())
        item = results[n - 1]
        if isinstance(item, BaseException):
            raise item
        return item

    return attempt


def _status(code: int) -> AttemptResult[str]:
    return AttemptResult(status_code=code, error_kind=classify_status(code), error_message="x")


async def test_loop_retries_listed_status_with_linear_sleeps(autojump_clock: trio.testing.MockClock) -> None:
    log: list[float] = []
    ok = AttemptResult(value="done", status_code=200)
    fn = _scripted([_status(503), _status(503), ok], log)
    outcome = await run_with_retries(fn, RetryPolicy(max_attempts=3, backoff_ms=100), timeout_s=10)
    assert outcome.last.value == "done"
    assert log == pytest.approx([0.0, 0.1, 0.3])
    assert [r.status_code for r in outcome.attempts] == [503, 503, 200]
    assert outcome.latency_ms == pytest.approx(300.0)


async def test_loop_does_not_retry_unlisted_status(autojump_clock: trio.testing.MockClock) -> None:
    log: list[float] = []
    outcome = await run_with_retries(
        _scripted([_status(400), _status(200)], log), RetryPolicy(max_attempts=3), timeout_s=10
    )
    assert len(outcome.attempts) == 1
    assert outcome.last.error_kind is ErrorKind.CLIENT_ERROR


async def test_loop_turns_transport_errors_into_results(autojump_clock: trio.testing.MockClock) -> None:
    log: list[float] = []
    errors: list[AttemptResult[str] | BaseException] = [
        httpx.ConnectError("refused", request=REQ),
        httpx.ReadError("reset", request=REQ),
    ]
    outcome = await run_with_retries(_scripted(errors, log), RetryPolicy(max_attempts=2), timeout_s=10)
    assert [r.error_kind for r in outcome.attempts] == [ErrorKind.CONNECT_ERROR, ErrorKind.SERVER_ERROR]
    assert outcome.last.error_message == "ReadError"
    assert outcome.last.status_code is None
    assert outcome.attempts[0].error_message == "ConnectError: refused"


async def test_loop_per_attempt_timeout(autojump_clock: trio.testing.MockClock) -> None:
    calls = 0

    async def attempt(n: int) -> AttemptResult[str]:
        nonlocal calls
        calls += 1
        if n == 1:
            await trio.sleep_forever()
        return AttemptResult(value="ok", status_code=200)

    outcome = await run_with_retries(attempt, RetryPolicy(max_attempts=2), timeout_s=0.5)
    assert calls == 2
    assert outcome.attempts[0].error_kind is ErrorKind.TIMEOUT
    assert outcome.attempts[0].error_message == TIMEOUT_REASON
    assert outcome.attempts[0].latency_ms == pytest.approx(500.0)
    assert outcome.last.value == "ok"


async def test_deadline_ends_a_hanging_attempt(autojump_clock: trio.testing.MockClock) -> None:
    async def attempt(n: int) -> AttemptResult[str]:
        await trio.sleep(100)
        return AttemptResult(value="late")

    policy = RetryPolicy(max_attempts=5)
    outcome = await run_with_retries(attempt, policy, timeout_s=60, deadline_s=1.0)
    assert outcome.last.error_kind is ErrorKind.TIMEOUT
    assert outcome.last.error_message == DEADLINE_REASON
    assert len(outcome.attempts) == 1
    assert outcome.latency_ms == pytest.approx(1000.0)


async def test_deadline_stops_before_a_sleep_that_would_pass_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[float] = []
    policy = RetryPolicy(max_attempts=10, backoff_ms=100)
    outcome = await run_with_retries(
        _scripted([_status(503)] * 10, log), policy, timeout_s=10, deadline_s=0.25
    )
    assert log == pytest.approx([0.0, 0.1])  # the next sleep (0.2 s) would end at 0.3 > 0.25
    assert outcome.last.status_code == 503
    assert trio.current_time() <= 0.25


async def test_outside_cancellation_propagates(autojump_clock: trio.testing.MockClock) -> None:
    async def attempt(n: int) -> AttemptResult[str]:
        await trio.sleep_forever()
        raise AssertionError

    with trio.move_on_after(2) as scope:
        await run_with_retries(attempt, RetryPolicy(max_attempts=3), timeout_s=60)
        pytest.fail("cancellation was swallowed")
    assert scope.cancelled_caught
