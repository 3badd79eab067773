"""Adaptive concurrency per endpoint (issue 32, items 1–3): the controller's rise and fall, the
shared pause and the pace, on trio's MockClock; a 429 that is not the cell's failure; and a run
against the mock's rate limit.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

import evalhydra
from evalhydra.config.schema import RetryConfig, ServiceConfig
from evalhydra.core.values import ChatRequest, ErrorKind
from evalhydra.execute.progress import Progress
from evalhydra.services.adaptive import (
    PACE_MARGIN,
    EndpointController,
    Endpoints,
    Feedback,
)
from evalhydra.services.limit_headers import parse_duration
from evalhydra.services.openai import OpenAICompatService
from tests.helpers import numbered_registry

OK = Feedback()
REFUSED = Feedback(refused=True, rate_limited=True)
OVERLOADED = Feedback(refused=True)  # a 503 or a refused connection


async def send_times(gate: EndpointController, n: int) -> list[float]:
    """When ``n`` requests in a row are let through (each ends with no answer to learn from)."""
    times = []
    for _ in range(n):
        sent_at = await gate.acquire()
        times.append(sent_at)
        gate.release(sent_at, Feedback(ok=False))
    return times


async def test_full_concurrency_until_overload_then_one_per_round_trip_never_past_the_ceiling(
        autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(max_concurrency=40)
    assert gate.limit == 40  # no limit seen: the requested concurrency from the first request
    held = [await gate.acquire() for _ in range(40)]
    assert gate.in_flight == 40
    for sent in held:
        gate.release(sent, OK)
    assert gate.limit == 40
    gate.release(await gate.acquire(), OVERLOADED)
    assert gate.limit == 20
    before = gate.limit
    for _ in range(20):  # after a refusal: 1 / limit per success, one per round trip
        gate.release(await gate.acquire(), OK)
    assert before + 0.9 < gate.limit < before + 1
    for _ in range(2000):  # about limit² / 2 successes to grow to the ceiling
        gate.release(await gate.acquire(), OK)
    assert gate.limit == 40


async def test_overload_of_one_round_trip_halves_the_limit_once(
        autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(max_concurrency=8)
    sent = [await gate.acquire() for _ in range(8)]
    await trio.sleep(0.05)
    for at in sent:  # every request of the window is refused
        gate.release(at, OVERLOADED)
    assert gate.limit == 4
    later = await gate.acquire()
    gate.release(later, OVERLOADED)  # sent after the cut: a new round trip, a new cut
    assert gate.limit == 2
    for _ in range(10):
        sent_at = await gate.acquire()
        gate.release(sent_at, OVERLOADED)
    assert gate.limit == 1  # never below one


async def test_a_429_paces_at_the_admitted_rate_and_leaves_the_concurrency_alone(
        autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(max_concurrency=64)
    for _ in range(100):  # 100 replies admitted over one second
        gate.release(await gate.acquire(), OK)
        await trio.sleep(0.01)
    gate.release(await gate.acquire(), REFUSED)  # bare: no header, no Retry-After
    assert gate.limit == 64 and gate.refusals == 1
    assert gate.pace == pytest.approx(100 * (1 - PACE_MARGIN), rel=0.02)
    times = await send_times(gate, 10)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps == pytest.approx([1 / gate.pace] * 9, rel=0.02)


async def test_a_learned_pace_rises_while_nothing_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(max_concurrency=64)
    for _ in range(50):
        gate.release(await gate.acquire(), OK)
        await trio.sleep(0.02)
    gate.release(await gate.acquire(), REFUSED)
    first = gate.pace
    for _ in range(400):  # eight seconds at the pace, none refused: 5 % of it a second after one
        gate.release(await gate.acquire(), OK)
    assert gate.pace > first * 1.2


async def test_the_limit_holds_requests_back(autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(max_concurrency=2)
    started: list[float] = []

    async def request() -> None:
        sent_at = await gate.acquire()
        started.append(trio.current_time())
        await trio.sleep(1)
        gate.release(sent_at, Feedback(ok=False))  # no answer: the limit stays

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(request)
    assert started == [0, 0, 1, 1, 2]


async def test_retry_after_pauses_every_request_only_when_nothing_is_admitted(
        autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(max_concurrency=8)
    gate.release(await gate.acquire(), Feedback(refused=True, rate_limited=True, retry_after_s=2.0))
    other = await gate.acquire()  # nothing admitted: a spent budget, every request waits it out
    assert other == pytest.approx(2.0)
    gate.release(other, OK)
    await trio.sleep(5)  # the admitted reply leaves the window
    headers = {"x-ratelimit-reset-requests": "1.5s"}  # no Retry-After: the budget's reset
    gate.release(await gate.acquire(), Feedback(refused=True, rate_limited=True, headers=headers))
    assert await gate.acquire() == pytest.approx(8.5)
    busy = EndpointController(max_concurrency=8)
    for _ in range(20):
        busy.release(await busy.acquire(), OK)
    start = trio.current_time()
    busy.release(await busy.acquire(), Feedback(refused=True, rate_limited=True, retry_after_s=2.0))
    assert await busy.acquire() - start < 0.5  # requests are admitted: only the refused one waits


async def test_the_budget_headers_pace_sends_before_the_provider_refuses(
        autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(max_concurrency=64)
    # 20 requests of budget, none left, full again in 0.2 s: it refills at 100 per second
    budget = {"x-ratelimit-limit-requests": "20", "x-ratelimit-remaining-requests": "0",
              "x-ratelimit-reset-requests": "200ms"}
    gate.release(await gate.acquire(), Feedback(headers=budget))
    times = await send_times(gate, 10)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps == pytest.approx([1 / (100 * (1 - PACE_MARGIN))] * 9)
    assert times[0] == pytest.approx(1 / (100 * (1 - PACE_MARGIN)))


async def test_a_token_budget_nearly_spent_pauses_until_it_resets(
        autojump_clock: trio.testing.MockClock) -> None:
    gate = EndpointController(max_concurrency=8)
    tokens = {"x-ratelimit-limit-tokens": "10000", "x-ratelimit-remaining-tokens": "200",
              "x-ratelimit-reset-tokens": "6s"}
    gate.release(await gate.acquire(), Feedback(headers=tokens))
    assert await gate.acquire() == pytest.approx(6.0)


def test_reset_durations_as_providers_write_them() -> None:
    assert [parse_duration(t) for t in ("1s", "6m0s", "20ms", "0.5", "1h2m3.5s", "", "soon", "5x")] == [
        1.0, 360.0, 0.02, 0.5, 3723.5, None, None, None]


async def test_every_service_of_a_run_on_one_endpoint_shares_its_controller() -> None:
    endpoints = Endpoints()
    first = endpoints.controller_for("http://a/v1/chat/completions", 16)
    assert endpoints.controller_for("http://a/v1/chat/completions", 64) is first and first.max_limit == 64
    assert endpoints.controller_for("http://b/v1/chat/completions", 16) is not first
    assert Endpoints().controller_for("http://a/v1/chat/completions", 16) is not first  # another run's


class Refusing:
    """An upstream that refuses ``refusals`` times with 429 and Retry-After, then answers."""

    def __init__(self, refusals: float, retry_after: str | None = "1") -> None:
        self.refusals = refusals
        self.retry_after = retry_after
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.times.append(trio.current_time())
        if len(self.times) <= self.refusals:
            headers = {"retry-after": self.retry_after} if self.retry_after else {}
            return httpx.Response(429, json={"error": {"message": "slow down"}}, headers=headers)
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "OK"}}]})


async def ask(upstream: Refusing, **cfg: Any) -> Any:
    config = ServiceConfig(name="svc", base_url="http://upstream.test", **cfg)
    service = OpenAICompatService(config, registry_root=Path("."), transport=httpx.MockTransport(upstream))
    try:
        return await service.complete(ChatRequest(user_content="Say OK"))
    finally:
        await service.aclose()


async def test_waiting_for_the_limit_uses_up_no_attempt(
        autojump_clock: trio.testing.MockClock) -> None:
    upstream = Refusing(5)
    done = await ask(upstream, retry=RetryConfig(max_attempts=1))
    assert done.ok and done.attempt_count == 6  # every refused attempt is kept
    assert [a.status_code for a in done.attempts] == [429] * 5 + [200]
    assert upstream.times == pytest.approx([0, 1, 2, 3, 4, 5])  # each Retry-After waited out


async def test_a_cell_refused_longer_than_the_bound_ends_rate_limited(
        autojump_clock: trio.testing.MockClock) -> None:
    upstream = Refusing(float("inf"), retry_after=None)
    done = await ask(upstream, retry=RetryConfig(max_attempts=2), rate_limit_timeout_s=30)
    assert done.error_kind is ErrorKind.RATE_LIMITED and done.error_message == "slow down"
    assert done.attempt_count > 2 and 30 <= upstream.times[-1] < 40
    off = await ask(Refusing(float("inf")), retry=RetryConfig(max_attempts=2, backoff_ms=10), adaptive=False)
    assert (off.error_kind, off.attempt_count) == (ErrorKind.RATE_LIMITED, 2)  # the retry policy alone


@pytest.mark.slow
def test_a_run_against_a_rate_limited_endpoint_scores_every_cell(tmp_path: Path) -> None:
    """300 cells at a budget of 150 requests a second (a burst of 20): the run lives within it. The
    first round trip goes out at the requested concurrency (an endpoint without a limit pays
    nothing), so its requests past the burst are refused once; the pace then holds."""
    registry = numbered_registry(tmp_path / "reg", 300)
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                                 f"store.path={tmp_path / 's.db'}", "service.mock.rate_limit_rps=150",
                                 "service.mock.latency_ms=20",
                                 "run.concurrency=32", "service.max_concurrency=32"])
    rows = list(result.rows())
    assert len(rows) == 300 and all(r["passed"] == 1 for r in rows)
    conn = sqlite3.connect(tmp_path / "s.db")
    (refused,) = conn.execute("select count(*) from attempts where status_code = 429").fetchone()
    conn.close()
    assert refused <= (32 - 20) + 0.15 * 300  # the first round trip past the burst, then 15 %


def test_the_summary_and_the_progress_line_name_the_refusals(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A budget of one request at a time: the first requests are refused, then paced."""
    registry = numbered_registry(tmp_path / "reg", 20)
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                                 f"store.path={tmp_path / 's.db'}", "service.mock.rate_limit_rps=100",
                                 "service.mock.rate_limit_burst=1",
                                 "service.mock.rate_limit_retry_after_s=0.05"])
    assert result.ok and all(r["passed"] == 1 for r in result.rows())
    out = capsys.readouterr().out
    line = next(text for text in out.splitlines() if text.startswith("rate limited: "))
    assert re.search(r"\(429\), each sent again after its wait; (paced at \d+ requests/s, )?adaptive "
                     r"concurrency ended at \d+ in flight", line), line
    progress = Progress(10, enabled=False)
    progress.extra = lambda: "limit 4/64 429s 3"
    assert progress.line().endswith("resumed=0  limit 4/64 429s 3")
