"""Every wait a provider's header sets is bounded (issue 46, item 3), on trio's MockClock: a
pause, the pace's wait for a request and a token budget's reset never pass the cap, whatever the
value (huge, negative, not a number, a date far away); a spent quota ends the cell at once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

from evalhydra.config.schema import RetryConfig, ServiceConfig
from evalhydra.core.values import ChatRequest, ErrorKind
from evalhydra.services.adaptive import EndpointController, Feedback
from evalhydra.services.limit_headers import budget_of, parse_duration
from evalhydra.services.openai import OpenAICompatService
from evalhydra.services.retry import retry_after_header
from tests.helpers import mock_process, numbered_registry, run_cli

HOSTILE = ["99999999h", "1e300", "inf", "-5", "nan", "Fri, 31 Dec 9999 23:59:59 GMT", "", "soon"]


async def _next_send_after(gate: EndpointController) -> float:
    start = trio.current_time()
    gate.release(await gate.acquire(), Feedback())
    return trio.current_time() - start


@pytest.mark.parametrize("value", HOSTILE)
async def test_a_429s_reset_header_pauses_at_most_the_cap(autojump_clock: trio.testing.MockClock,
                                                          value: str) -> None:
    gate = EndpointController(8, cap_s=5.0)
    refused = Feedback(refused=True, rate_limited=True, headers={"x-ratelimit-reset-requests": value})
    gate.release(await gate.acquire(), refused)
    assert await _next_send_after(gate) <= 5.0


@pytest.mark.parametrize("value", HOSTILE)
async def test_a_spent_budget_with_a_far_reset_waits_at_most_the_cap(autojump_clock: trio.testing.MockClock,
                                                                     value: str) -> None:
    gate = EndpointController(8, cap_s=5.0)
    spent = Feedback(headers={"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "0",
                              "x-ratelimit-reset-requests": value, "x-ratelimit-limit-tokens": "1000000",
                              "x-ratelimit-remaining-tokens": "1", "x-ratelimit-reset-tokens": value})
    gate.release(await gate.acquire(), spent)
    for _ in range(3):  # each request of a spent budget, and the token pause
        assert await _next_send_after(gate) <= 5.0 + 1e-9


async def test_a_nonsense_cap_falls_back_to_the_default() -> None:
    assert EndpointController(4, cap_s=float("nan")).cap_s == 60.0
    assert EndpointController(4, cap_s=-1).cap_s == 60.0
    assert EndpointController(4, cap_s=120).cap_s == 120  # a cap above the default is the user's


def test_durations_that_are_no_durations_are_none_or_zero() -> None:
    assert parse_duration("nan") == 0.0 and parse_duration("-5") == 0.0
    assert parse_duration("soon") is None and parse_duration("") is None


class Quota:
    """A provider whose daily quota is spent: every request is refused for a day."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.times.append(trio.current_time())
        return httpx.Response(429, json={"error": {"message": "daily quota exceeded"}},
                              headers={"retry-after": "86400"})


async def test_a_spent_daily_quota_ends_the_cell_rate_limited_at_once(
        autojump_clock: trio.testing.MockClock) -> None:
    upstream = Quota()
    config = ServiceConfig(name="svc", base_url="http://upstream.test", retry=RetryConfig(max_attempts=3),
                           rate_limit_timeout_s=600)
    service = OpenAICompatService(config, registry_root=Path("."), transport=httpx.MockTransport(upstream))
    try:
        done = await service.complete(ChatRequest(user_content="Say OK"))
    finally:
        await service.aclose()
    assert done.error_kind is ErrorKind.RATE_LIMITED
    assert upstream.times == [0.0]  # no ten-minute wait for a day-long refusal


@pytest.mark.slow
def test_a_run_against_a_spent_quota_ends_at_once_with_exit_3_and_a_fix(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 40)
    with mock_process("--fail-rate", "1", "--fail-status", "429", "--retry-after-s", "86400") as url:
        started = time.monotonic()
        res = run_cli(f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
                      f"service.base_url={url}", "run.progress=false", cwd=tmp_path, timeout=120)
        wall = time.monotonic() - started
    assert res.returncode == 3, res.stdout + res.stderr
    assert wall < 30  # no cell waited for a day, nor for service.rate_limit_timeout_s
    assert "cells were rate limited (429)" in res.stdout + res.stderr


def test_provider_headers_as_the_providers_document_them() -> None:
    in_a_minute = (datetime.now(UTC) + timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    anthropic = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
                 "anthropic-ratelimit-requests-reset": in_a_minute,
                 "anthropic-ratelimit-tokens-limit": "40000", "anthropic-ratelimit-tokens-remaining": "39000",
                 "anthropic-ratelimit-tokens-reset": in_a_minute, "retry-after": "12"}
    limit, remaining, reset = budget_of(anthropic, "requests")
    assert (limit, remaining) == (50, 49) and reset == pytest.approx(60, abs=2)
    assert budget_of(anthropic, "tokens")[:2] == (40000, 39000)
    openai = {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999",
              "x-ratelimit-reset-requests": "6ms", "x-ratelimit-reset-tokens": "6m0s",
              "x-ratelimit-limit-tokens": "30000000", "x-ratelimit-remaining-tokens": "29999990"}
    assert budget_of(openai, "requests") == (10000, 9999, pytest.approx(0.006))
    assert budget_of(openai, "tokens")[2] == 360.0
    azure = httpx.Headers({"retry-after": "1", "retry-after-ms": "250",
                           "x-ratelimit-remaining-requests": "0"})
    assert retry_after_header(azure) == 0.25  # the finer one wins
    assert retry_after_header(httpx.Headers({"retry-after": "2"})) == 2.0
