"""A rate-limited provider in one trio run, for MockClock tests of adaptive limits: the mock's own
token bucket (:class:`~evalhydra.services.mock.limits.RequestBudget`) behind an httpx transport,
answering in one provider's dialect after a fixed latency."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

from evalhydra.config.schema import RetryConfig, ServiceConfig
from evalhydra.core.values import ChatRequest
from evalhydra.services.mock.limits import RequestBudget
from evalhydra.services.mock.settings import MockSettings
from evalhydra.services.openai import OpenAICompatService

ANSWER = {"choices": [{"message": {"role": "assistant", "content": "OK"}}]}


@dataclass
class Provider:
    """The bucket, its latency, and what it saw."""

    settings: MockSettings
    latency_s: float = 0.05
    budget: RequestBudget = field(default_factory=RequestBudget)
    in_flight: int = 0
    most_in_flight: int = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        limited = self.settings.rate_limit_rps > 0
        admitted, headers = self.budget.take(self.settings) if limited else (True, ())
        raw = [(name.decode(), value.decode()) for name, value in headers]
        if not admitted:
            return httpx.Response(429, json={"error": {"message": "rate limited"}}, headers=raw)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await trio.sleep(self.latency_s)
        finally:
            self.in_flight -= 1
        return httpx.Response(200, json=ANSWER, headers=raw)


async def run_cells(provider: Provider, cells: int, *, concurrency: int = 256, **service: Any) -> float:
    """Send ``cells`` requests through one service, ``concurrency`` at a time; the wall it took."""
    config = ServiceConfig(name="svc", base_url="http://provider.test", max_concurrency=concurrency,
                           retry=RetryConfig(max_attempts=3, backoff_ms=500), **service)
    svc = OpenAICompatService(config, registry_root=Path("."), transport=httpx.MockTransport(provider))
    started = trio.current_time()
    limiter = trio.CapacityLimiter(concurrency)

    async def cell() -> None:
        async with limiter:
            done = await svc.complete(ChatRequest(user_content="Say OK"))
            assert done.ok, done.error_message

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(cells):
                nursery.start_soon(cell)
    finally:
        await svc.aclose()
    return trio.current_time() - started


def provider(dialect: str, rps: float = 150.0, **extra: Any) -> Provider:
    """A bucket of ``rps`` requests a second (a burst of 20) speaking ``dialect`` (0: no limit)."""
    settings = MockSettings(rate_limit_rps=rps, rate_limit_burst=20, rate_limit_dialect=dialect, **extra)
    return Provider(settings)
