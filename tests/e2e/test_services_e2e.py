"""Issue 3 end to end: ``OpenAICompatService`` against the real mock server on 127.0.0.1.

Two layers:

* the service alone, against an in-process mock (:func:`open_mock_server`) in
  the test's trio loop. Loopback I/O between two tasks of one process is ready
  as soon as the peer has written, so pytest-trio's ``autojump_clock`` only
  jumps when every task really waits on a timer: sleeps, timeouts and rate
  limits are measured exactly in virtual time;
* full runs (:func:`evalhydra.job.run.run_plan`, and the CLI where the process
  matters: warnings on stderr, Hydra's saved config, the log file) against a
  mock process, checking the ``results`` and ``attempts`` rows.
"""

from __future__ import annotations

import base64
import json
import random
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from omegaconf import DictConfig

from evalhydra.config.schema import PricingConfig, RateLimitConfig, RetryConfig, ServiceConfig
from evalhydra.core.values import ChatRequest, ErrorKind, ToolSpec
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from evalhydra.services.mock import MockServer, MockSettings, open_mock_server
from evalhydra.services.mock.replies import usage_for
from evalhydra.services.openai import OpenAICompatService
from evalhydra.services.retry import RetryPolicy
from tests.conftest import smoke_eval, write_registry
from tests.helpers import chat_requests, mock_call, numbered_registry, query_rows, run_cli

# Every test here runs on both transports (service.transport: lean and httpx), on real sockets.
pytestmark = pytest.mark.usefixtures("wire")

SEARCH_WEB = ToolSpec(
    name="search_web",
    description="Search the web for current information.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
TIMEOUT_NAMES = {"Timeout", "ReadTimeout"}  # trio's fail_after or httpx's read timeout, same instant


# --------------------------------------------------------------------------- in-process helpers


@dataclass(frozen=True)
class Seen:
    """One chat request as the mock received it, stamped with trio's (virtual) clock."""

    time: float
    target: bytes
    head: bytes
    body: bytes

    def json(self) -> dict[str, Any]:
        return dict(json.loads(self.body))


@asynccontextmanager
async def mock(**settings: Any) -> AsyncIterator[tuple[MockServer, list[Seen]]]:
    """An in-process mock on a free loopback port that records every chat request."""
    async with open_mock_server(MockSettings(**settings)) as server:
        seen: list[Seen] = []
        inner = server.handle

        async def handle(method: bytes, target: bytes, body: bytes, head: bytes = b"") -> Any:
            if target.split(b"?", 1)[0].rstrip(b"/").endswith(b"/chat/completions"):
                seen.append(Seen(trio.current_time(), target, head, body))
            return await inner(method, target, body, head)

        server.handle = handle  # type: ignore[method-assign]
        yield server, seen


@asynccontextmanager
async def service(base_url: str, root: Path, rng: random.Random | None = None,
                  **cfg: Any) -> AsyncIterator[OpenAICompatService]:
    cfg.setdefault("timeout_ms", 2000)
    # a 429 uses up an attempt here, as any failure: these tests are about the retry policy
    # (tests/services/test_adaptive.py has the endpoint waits)
    cfg.setdefault("rate_limit_timeout_s", 0)
    svc = OpenAICompatService(ServiceConfig(name="svc", base_url=base_url, **cfg), registry_root=root,
                              rng=rng or random.Random(0))
    try:
        yield svc
    finally:
        await svc.aclose()


def gaps(seen: list[Seen]) -> list[float]:
    return [round(b.time - a.time, 6) for a, b in zip(seen, seen[1:], strict=False)]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ASK = ChatRequest("Reply with exactly OK.")


async def test_the_suite_runs_on_the_chosen_transport(wire: str, tmp_path: Path) -> None:
    async with mock() as (server, _), service(server.url, tmp_path) as svc:
        done = await svc.complete(ASK)
    assert svc._pool.kind == wire
    assert [type(t).__name__ for t in svc._pool.transports][0] == (
        "LeanTransport" if wire == "lean" else "AsyncHTTPTransport")
    assert done.output == "OK"


# --------------------------------------------------------------------------- 12. every fault


@dataclass(frozen=True)
class Fault:
    settings: dict[str, Any]
    kind: ErrorKind
    status: int | None
    attempts: int
    messages: frozenset[str]


def fault(kind: ErrorKind, status: int | None, attempts: int, *messages: str, **settings: Any) -> Fault:
    return Fault(settings, kind, status, attempts, frozenset(messages))


# max_attempts=2 everywhere: retried faults show two attempts, final ones one.
FAULTS = {
    "429": fault(ErrorKind.RATE_LIMITED, 429, 2, "mock failure", fault="fail", fail_status=429),
    "500": fault(ErrorKind.SERVER_ERROR, 500, 2, "mock failure", fault="fail", fail_status=500),
    "502": fault(ErrorKind.SERVER_ERROR, 502, 2, "mock failure", fault="fail", fail_status=502),
    "503": fault(ErrorKind.SERVER_ERROR, 503, 2, "mock failure", fault="fail", fail_status=503),
    "400": fault(ErrorKind.CLIENT_ERROR, 400, 1, "mock failure", fault="fail", fail_status=400),
    "reset": fault(ErrorKind.SERVER_ERROR, None, 2, "RemoteProtocolError", "ReadError", fault="reset"),
    "hang": fault(ErrorKind.TIMEOUT, None, 2, *TIMEOUT_NAMES, fault="hang"),
    "stall": fault(ErrorKind.TIMEOUT, None, 2, *TIMEOUT_NAMES, fault="stall"),
    "malformed": fault(ErrorKind.INVALID_RESPONSE, 200, 1, "InvalidUpstreamJson", fault="malformed"),
    "html": fault(ErrorKind.INVALID_RESPONSE, 200, 1, "InvalidUpstreamJson", fault="html"),
    "missing_choices": fault(ErrorKind.INVALID_RESPONSE, 200, 1, "MalformedSuccessPayload",
                             fault="missing_choices"),
    "empty_choices": fault(ErrorKind.INVALID_RESPONSE, 200, 1, "MalformedSuccessPayload",
                           fault="empty_choices"),
    "oversized": fault(ErrorKind.INVALID_RESPONSE, 200, 1, "ResponseTooLarge", fault="oversized"),
}


@pytest.mark.parametrize("name", list(FAULTS))
async def test_every_fault_on_a_loopback_socket(
    name: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    want = FAULTS[name]
    async with mock(**want.settings) as (server, seen), \
            service(server.url, tmp_path, retry=RetryConfig(max_attempts=2, backoff_ms=250)) as svc:
        done = await svc.complete(ASK)
        server.settings.fault = None  # the pool is not poisoned: the next call on it succeeds
        if want.kind is ErrorKind.TIMEOUT:  # an endpoint never answered is silent for a probe's time
            await trio.sleep(2.0)
        assert (await svc.complete(ASK)).output == "OK"
        del seen[-1]
    assert done.error_kind is want.kind
    assert done.status_code == want.status
    assert done.error_message in want.messages
    assert (done.attempt_count, done.retried) == (want.attempts, want.attempts > 1)
    assert (done.output, done.tool_calls, done.cost_usd) == ("", (), 0.0)
    assert len(seen) == want.attempts  # every attempt reached the socket
    assert [(a.attempt, a.status_code, a.error_kind) for a in done.attempts] == [
        (i, want.status, want.kind) for i in range(1, want.attempts + 1)]
    if want.kind is ErrorKind.TIMEOUT:  # hang past timeout_ms=2000, both attempts, then no more
        assert [a.latency_ms for a in done.attempts] == pytest.approx([2000.0, 2000.0])
        assert gaps(seen) == [pytest.approx(2.25)]
    elif want.attempts == 2:  # linear backoff: 250 ms × attempt 1
        assert gaps(seen) == [pytest.approx(0.25)]


async def test_connection_refused_is_a_retried_connect_error(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with service(url, tmp_path, retry=RetryConfig(max_attempts=3, backoff_ms=100)) as svc:
        start = trio.current_time()
        done = await svc.complete(ASK)
        elapsed = trio.current_time() - start
    assert (done.error_kind, done.status_code, done.error_message) == (
        ErrorKind.CONNECT_ERROR, None, "ConnectError")
    assert (done.attempt_count, done.retried) == (3, True)
    assert [a.error_kind for a in done.attempts] == [ErrorKind.CONNECT_ERROR] * 3
    assert all((a.error_message or "").startswith("ConnectError") for a in done.attempts)
    assert elapsed == pytest.approx(0.1 + 0.2)  # linear sleeps between the attempts


async def test_content_null_with_tool_calls_and_other_good_shapes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    pricing = PricingConfig(input_per_mtok=2.0, output_per_mtok=8.0)
    async with mock() as (server, seen), service(server.url, tmp_path, pricing=pricing) as svc:
        ask = ChatRequest("Search the web for the weather in Melbourne.", tools=(SEARCH_WEB,), model="gpt-x")
        done = await svc.complete(ask)
        assert done.ok and done.output == ""  # content null → ""
        (call,) = done.tool_calls
        assert (call.name, call.arguments) == ("search_web", '{"query":"weather melbourne"}')
        assert call.id is not None and call.id.startswith("call_")  # the provider's id, kept
        assert done.model == "gpt-x" and done.status_code == 200
        usage = usage_for(seen[0].json(), {"content": None, "tool_calls": [
            {"function": {"name": "search_web", "arguments": '{"query":"weather melbourne"}'}}]})
        assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (
            usage["prompt_tokens"], usage["completion_tokens"])
        assert done.cost_usd == pytest.approx(
            (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6)
        server.settings.fault = "content_null"  # content null and no tool calls: still a success
        done = await svc.complete(ASK)
        assert done.ok and (done.output, done.tool_calls) == ("", ())
        server.settings.fault = "no_usage"  # usage absent: zeros, no cost
        done = await svc.complete(ASK)
        assert done.ok and done.output == "OK" and done.usage.prompt_tokens == 0 and done.cost_usd == 0.0


@pytest.mark.parametrize("limit", [4, 40])
async def test_in_flight_cap_and_connection_reuse_on_real_sockets(
    limit: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """max_concurrency bounds what the server sees at once; connections are kept alive and reused."""
    async with mock(latency_ms=100) as (server, seen), \
            service(server.url, tmp_path, max_concurrency=limit) as svc:
        for _ in range(2):
            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(svc.complete, ChatRequest(f"Reply with exactly {i}."))
    assert len(seen) == 200 and server.stats.ok == 200
    assert server.stats.max_in_flight == limit
    assert server.stats.connections <= limit  # never more sockets than slots, across both rounds


# --------------------------------------------------------------------------- 7. retries


async def test_503_503_200_linear_backoff_in_virtual_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with mock(fail_first_n=2, fail_status=503) as (server, seen), \
            service(server.url, tmp_path, retry=RetryConfig(max_attempts=3, backoff_ms=100)) as svc:
        done = await svc.complete(ASK)
    assert done.ok and done.output == "OK"
    assert (done.attempt_count, done.retried, done.status_code) == (3, True, 200)
    assert gaps(seen) == [0.1, 0.2]  # backoff_ms × attempt, no jitter
    assert [(a.status_code, a.error_kind, a.error_message) for a in done.attempts] == [
        (503, ErrorKind.SERVER_ERROR, "mock failure"), (503, ErrorKind.SERVER_ERROR, "mock failure"),
        (200, None, None)]
    assert done.latency_ms == pytest.approx(300.0)


async def test_exponential_strategy_draws_capped_full_jitter(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    retry = RetryConfig(max_attempts=6, backoff_ms=100, strategy="exponential", max_backoff_ms=250)
    async with mock(fault="fail", fail_status=503) as (server, seen), \
            service(server.url, tmp_path, rng=random.Random(7), retry=retry) as svc:
        done = await svc.complete(ASK)
    assert done.attempt_count == 6 and done.error_kind is ErrorKind.SERVER_ERROR
    caps = [0.1, 0.2, 0.25, 0.25, 0.25]  # min(max_backoff, backoff × 2^(attempt-1))
    assert all(0.0 <= g <= cap for g, cap in zip(gaps(seen), caps, strict=True))
    policy, rng = RetryPolicy.from_config(retry), random.Random(7)
    assert gaps(seen) == pytest.approx([policy.backoff_s(n, rng) for n in range(1, 6)], abs=1e-5)
    assert len(set(gaps(seen))) == 5  # jittered, not a fixed schedule


@pytest.mark.parametrize(
    ("settings", "retry", "low", "high"),
    [
        pytest.param({"retry_after_s": 2}, {}, 2.0, 2.0, id="seconds"),
        pytest.param({"retry_after_s": 3, "retry_after_http_date": True}, {}, 2.0, 3.0, id="http-date"),
        pytest.param({"retry_after_s": 30}, {"retry_after_cap_ms": 1500}, 1.5, 1.5, id="capped"),
        pytest.param({"retry_after_s": 0}, {"backoff_ms": 400}, 0.4, 0.4, id="backoff-wins"),
    ],
)
async def test_retry_after_is_honoured_up_to_the_cap(
    settings: dict[str, Any], retry: dict[str, Any], low: float, high: float, tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
) -> None:
    policy = RetryConfig(max_attempts=2, **{"backoff_ms": 100, **retry})
    async with mock(fail_first_n=1, fail_status=429, **settings) as (server, seen), \
            service(server.url, tmp_path, retry=policy) as svc:
        done = await svc.complete(ASK)
    assert done.ok and done.attempt_count == 2
    assert done.attempts[0].error_kind is ErrorKind.RATE_LIMITED
    (gap,) = gaps(seen)
    if low == high:
        assert gap == pytest.approx(low)
    else:  # an HTTP-date has whole seconds: the wait is the rest of the 3 s
        assert low < gap <= high


async def test_deadline_bounds_all_attempts(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    retry = RetryConfig(max_attempts=10, backoff_ms=400)
    async with mock(fault="fail", fail_status=503) as (server, seen), \
            service(server.url, tmp_path, retry=retry, deadline_ms=1000) as svc:
        done = await svc.complete(ASK)
        # 0 s, sleep 0.4, 0.4 s; the next sleep (0.8) would pass 1 s: stop with the last failure
        assert gaps(seen) == [0.4]
        assert (done.error_kind, done.status_code, done.attempt_count) == (ErrorKind.SERVER_ERROR, 503, 2)
        server.settings.fault = "hang"
        seen.clear()
        start = trio.current_time()
        done = await svc.complete(ASK)  # timeout_ms 2000 > deadline: the deadline ends attempt 1
        assert trio.current_time() - start == pytest.approx(1.0)
    assert len(seen) == 1
    assert (done.error_kind, done.error_message, done.attempt_count) == (
        ErrorKind.TIMEOUT, "DeadlineExceeded", 1)
    assert done.latency_ms == pytest.approx(1000.0)


# --------------------------------------------------------------------------- 9. rate limits


def windows_hold(points: Sequence[tuple[float, float]], capacity: float, per_s: float,
                 slack: float = 0.0) -> bool:
    """Whether every window [t_i, t_j] spends at most ``capacity + per_s × (t_j - t_i) + slack``."""
    ordered = sorted(points)
    for i, (start, _) in enumerate(ordered):
        spent = 0.0
        for end, amount in ordered[i:]:
            spent += amount
            if spent > capacity + per_s * (end - start) + slack + 1e-6:
                return False
    return True


async def test_rpm_budget_holds_over_every_window(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """rpm=60: a bucket of 60 that refills 1/s; 80 concurrent calls → 60 at once, then one a second."""
    async with mock() as (server, seen), \
            service(server.url, tmp_path, rate_limit=RateLimitConfig(rpm=60), max_concurrency=80) as svc:
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(80):
                nursery.start_soon(svc.complete, ChatRequest(f"Reply with exactly {i}."))
    times = [s.time - start for s in seen]
    assert len(times) == 80 and server.stats.ok == 80
    assert windows_hold([(t, 1) for t in times], capacity=60, per_s=1)
    assert sum(1 for t in times if t < 1e-6) == 60  # the starting burst is one minute's budget
    assert max(times) == pytest.approx(20.0)  # then exactly the steady rate
    assert not windows_hold([(t, 1) for t in times], capacity=59, per_s=1)  # and no slower


async def test_tpm_budget_is_charged_by_estimate_and_corrected_by_usage(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """tpm=600 with long replies: the real usage (~10× the estimate) is what paces the calls."""
    async with mock(fixed_reply="lorem ipsum " * 80) as (server, seen), \
            service(server.url, tmp_path, rate_limit=RateLimitConfig(tpm=600), max_concurrency=1) as svc:
        start = trio.current_time()
        results = [await svc.complete(ChatRequest(f"Say something long, please ({i}).")) for i in range(12)]
    assert all(r.ok for r in results)
    spent = [(s.time - start, r.usage.prompt_tokens + r.usage.completion_tokens)
             for s, r in zip(seen, results, strict=True)]
    biggest = max(amount for _, amount in spent)
    estimate = -(-len(seen[0].body) // 4)
    assert biggest > 5 * estimate and 12 * estimate < 600  # estimates alone would never wait
    # one call's under-estimate at most is in flight uncorrected (max_concurrency=1)
    assert windows_hold(spent, capacity=600, per_s=10, slack=biggest)
    total = sum(amount for _, amount in spent)
    assert spent[-1][0] >= (total - 600 - biggest) / 10  # paced by real usage, not by the estimate


# --------------------------------------------------------------------------- 2. URL normalisation


async def test_every_base_url_form_reaches_v1_chat_completions(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with mock() as (server, seen):
        host = f"http://127.0.0.1:{server.port}"
        forms = [host, host + "/", host + "/v1", host + "/v1/", host + "/v1/chat/completions",
                 f"  {host}/v1  "]
        for form in forms:
            async with service(form, tmp_path) as svc:
                assert (await svc.complete(ASK)).output == "OK", form
    assert [s.target for s in seen] == [b"/v1/chat/completions"] * len(forms)


# --------------------------------------------------------------------------- proxies from the environment


async def test_requests_follow_the_environment_proxy_unless_no_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    upstream = f"http://127.0.0.1:{closed_port()}/v1"  # nothing listens there
    async with mock() as (proxy, seen):
        monkeypatch.setenv("http_proxy", proxy.url.removesuffix("/v1"))
        async with service(upstream, tmp_path) as svc:
            done = await svc.complete(ASK)
        assert done.ok and done.output == "OK"
        assert seen[-1].target == f"{upstream}/chat/completions".encode()  # proxy form
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        async with service(upstream, tmp_path) as svc:
            direct = await svc.complete(ASK)
        assert direct.error_kind == ErrorKind.CONNECT_ERROR and len(seen) == 1


# --------------------------------------------------------------------------- 3. auth on the wire


async def test_bearer_only_when_the_key_is_set_and_not_blank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = {"X-Token": "Bearer ${env:EH_E2E_TOKEN}", "X-Static": "yes"}
    async with mock() as (server, _), \
            service(server.url, tmp_path, api_key_env="EH_E2E_KEY", headers=headers) as svc, \
            httpx.AsyncClient(base_url=server.url) as control:

        async def sent() -> dict[str, str]:
            assert (await svc.complete(ASK)).ok
            got = (await control.get("/_mock/last_headers")).json()
            assert got == server.last_headers
            return dict(got)

        monkeypatch.setenv("EH_E2E_KEY", "  sk-e2e-secret  ")
        monkeypatch.setenv("EH_E2E_TOKEN", "tok-e2e-secret")
        got = await sent()
        assert got["authorization"] == "Bearer sk-e2e-secret"  # trimmed
        assert got["x-token"] == "Bearer tok-e2e-secret" and got["x-static"] == "yes"
        assert got["content-type"] == "application/json"
        monkeypatch.setenv("EH_E2E_KEY", "   ")
        monkeypatch.delenv("EH_E2E_TOKEN")
        got = await sent()
        assert "authorization" not in got and "x-token" not in got  # blank key, unset variable
        monkeypatch.delenv("EH_E2E_KEY")
        assert "authorization" not in await sent()


# --------------------------------------------------------------------------- full runs


def rows(db: Path, sql: str, *args: Any) -> list[dict[str, Any]]:
    return query_rows(db, sql, args)


def markdown_table(path: Path, column: str) -> list[dict[str, str]]:
    """The rows of the first table in a markdown file whose header has ``column``."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("|") and column in [c.strip() for c in line.strip("|").split("|")])
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    table = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        table.append(dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)))
    return table


def plan_for(compose: Callable[..., DictConfig], *overrides: str) -> Any:
    return build_plan(compose(*overrides), overrides)


def service_args(url: str, *extra: str) -> list[str]:
    return ["service=mock", "service.mock.enabled=false", f"service.base_url={url}",
            "service.rate_limit_timeout_s=0", *extra]  # a 429 storm ends in the cells' attempts


RUN_FAULTS = {
    "429": FAULTS["429"], "500": FAULTS["500"], "502": FAULTS["502"], "503": FAULTS["503"],
    "reset": FAULTS["reset"], "hang": FAULTS["hang"], "malformed": FAULTS["malformed"],
    "missing_choices": FAULTS["missing_choices"], "oversized": FAULTS["oversized"],
}


#: Faults whose full run is a variant of another's (a status, a body cut): with the slow tests.
_SLOW_FAULTS = {"hang", "429", "502", "503", "reset", "missing_choices", "oversized"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_FAULTS else n
                                  for n in [*RUN_FAULTS, "refused", "deadline"]])
def test_full_run_stores_the_fault_and_every_attempt(
    name: str, url: str, tmp_path: Path, compose: Callable[..., DictConfig],
    capsys: pytest.CaptureFixture[str],
) -> None:
    extra = ["service.timeout_ms=400"]
    if name == "refused":
        want = fault(ErrorKind.CONNECT_ERROR, None, 2, "ConnectError")
        base = f"http://127.0.0.1:{closed_port()}/v1"
    elif name == "deadline":  # the per-cell deadline (300 ms) ends a hanging attempt before its timeout
        want, base = fault(ErrorKind.TIMEOUT, None, 1, "DeadlineExceeded", fault="hang"), url
        mock_call(url, "config", want.settings)
        extra = ["service.deadline_ms=300", "service.timeout_ms=5000"]
    else:
        want, base = RUN_FAULTS[name], url
        mock_call(url, "config", want.settings)
    registry = numbered_registry(tmp_path / "reg", 1)
    plan = plan_for(compose, f"registry={registry}", *service_args(base), "eval=g",
                    "service.retry.max_attempts=2", "service.retry.backoff_ms=10", *extra)
    assert run_plan(plan, output_dir=tmp_path / "out") == 3  # every cell errored: nothing measured
    db = tmp_path / "store.db"
    (row,) = rows(db, "select * from results")
    assert (row["status"], row["error_kind"], row["status_code"]) == ("ERROR", want.kind, want.status)
    assert (row["attempt_count"], row["retried"], row["passed"]) == (want.attempts, want.attempts > 1, 0)
    assert row["failure_reason"] in want.messages
    assert row["output"] == "" and row["cost_usd"] == 0.0
    attempts = rows(db, "select * from attempts order by attempt")
    assert [(a["call"], a["attempt"], a["status_code"], a["error_kind"]) for a in attempts] == [
        ("candidate", i, want.status, want.kind) for i in range(1, want.attempts + 1)]
    assert all(a["error_message"].split(":")[0] in want.messages for a in attempts)
    assert all(a["cell_key"] == row["cell_key"] and a["latency_ms"] >= 0 for a in attempts)
    if name == "hang":
        assert all(a["latency_ms"] >= 400 for a in attempts)
    if name == "deadline":
        assert 300 <= attempts[0]["latency_ms"] < 2000 and row["latency_ms"] < 2000
    if name != "refused":
        assert chat_requests(url) == want.attempts
    summary = capsys.readouterr().out
    assert "0 passed, 0 failed, 1 error (" in summary


def test_rate_limit_storm_keeps_the_pass_rate_and_retry_errors_reruns_it(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig], capsys: pytest.CaptureFixture[str],
) -> None:
    """Half the cells hit a 429 storm: they are errors, the pass rate stays 100%; retry_errors fixes them."""
    registry = numbered_registry(tmp_path / "reg", 6)
    mock_call(url, "config", {"fail_first_n": 3, "fail_status": 429, "retry_after_s": 0})
    args = [f"registry={registry}", *service_args(url), "eval=g", "run.concurrency=1"]
    assert run_plan(plan_for(compose, *args), output_dir=tmp_path / "one") == 0
    out = capsys.readouterr().out
    db = tmp_path / "store.db"
    assert rows(db, "select status, error_kind, count(*) as n from results group by 1, 2 order by 1") == [
        {"status": "ERROR", "error_kind": "rate_limited", "n": 3},
        {"status": "PASS", "error_kind": None, "n": 3}]
    assert "100.0%" in out and "6 cells, 3 passed, 0 failed, 3 errors" in out
    (table,) = markdown_table(tmp_path / "one" / "report.md", "Pass rate")
    assert (table["Pass rate"], int(table["Errors"]), int(table["Passed"])) == ("100.0%", 3, 3)
    assert int(table.get("Failed", 0)) == 0  # errors are not failures
    assert "rate_limited" in (tmp_path / "one" / "report.md").read_text()  # errors name their kind

    mock_call(url, "config", {"fail_first_n": 0})
    mock_call(url, "reset", {})
    again = run_plan(plan_for(compose, *args, "run.retry_errors=true"), output_dir=tmp_path / "two")
    assert again == 0 and chat_requests(url) == 3  # only the errored cells
    assert rows(db, "select count(*) as n from results where passed = 1") == [{"n": 6}]
    assert "6 cells, 6 passed, 0 failed, 0 errors" in capsys.readouterr().out


def test_store_views_keep_errors_out_of_the_pass_rate(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig]
) -> None:
    registry = numbered_registry(tmp_path / "reg", 4)
    mock_call(url, "config", {"fail_first_n": 2, "fail_status": 429})
    run_plan(plan_for(compose, f"registry={registry}", *service_args(url), "eval=g", "run.concurrency=1"),
             output_dir=tmp_path / "out")
    db = tmp_path / "store.db"
    (stats,) = rows(db, "select * from run_eval_stats")
    assert (stats["passed"], stats["errors"], stats["failed"], stats["pass_rate"]) == (2, 2, 0, 1.0)
    (per_run,) = rows(db, "select * from run_pass_rates")
    assert (per_run["failed"], per_run["pass_rate"]) == (0, 1.0)
    (legacy,) = rows(db, "select * from eval_stats")
    assert legacy["pass_rate"] == 1.0


# --------------------------------------------------------------------------- 5. attachments


def test_multimodal_eval_sends_the_seed_content_parts(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig]
) -> None:
    from evalhydra.registry.definitions import resolve_registry_root

    root = resolve_registry_root("registry")  # the packaged example registry
    notes = (root / "assets/changelogs/release.md").read_text()
    image = base64.b64encode((root / "assets/images/red_mug.png").read_bytes()).decode()
    plan = plan_for(compose, *service_args(url), "eval=multimodal.release_notes")
    assert run_plan(plan, output_dir=tmp_path / "a") == 0
    (message,) = mock_call(url, "last")["messages"]
    assert message == {"role": "user", "content": [{"type": "text", "text": (
        "Summarize the attached product changelog in one sentence."
        f"\n\n[Attachment: release notes (text/markdown)]\n```text\n{notes}\n```")}]}
    plan = plan_for(compose, *service_args(url), "eval=multimodal.image_object")
    assert run_plan(plan, output_dir=tmp_path / "b") == 0
    (message,) = mock_call(url, "last")["messages"]
    assert message["content"] == [
        {"type": "text", "text": "What object is shown in the attached image?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}}]
    stored = rows(tmp_path / "store.db", "select eval_id, error_kind, prompt_tokens from results order by 1")
    assert [(r["eval_id"], r["error_kind"]) for r in stored] == [
        ("multimodal.image_object", None), ("multimodal.release_notes", None)]
    assert all(r["prompt_tokens"] > 0 for r in stored)


def test_tool_eval_sends_seed_tools_and_stores_null_content_tool_calls(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig]
) -> None:
    plan = plan_for(compose, *service_args(url), "eval=tools.search_web")
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    body = mock_call(url, "last")
    assert body["tools"] == [{"type": "function", "function": {
        "name": "search_web", "description": "Search the web for current information.",
        "parameters": SEARCH_WEB.parameters}}]
    assert body["stream"] is False and set(body) == {"model", "messages", "tools", "stream"}
    (row,) = rows(tmp_path / "store.db", "select * from results")
    assert (row["status"], row["output"], row["error_kind"]) == ("PASS", "", None)
    assert json.loads(row["tool_calls"]) == [
        {"name": "search_web", "arguments": '{"query":"weather melbourne"}'}]


def test_multimodal_group_runs_both_evals_in_one_run(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig]
) -> None:
    plan = plan_for(compose, *service_args(url), "eval=multimodal", "run.concurrency=1")
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    assert chat_requests(url) == 2
    ok = rows(tmp_path / "store.db", "select count(*) as n from results where error_kind is null")
    assert ok == [{"n": 2}]


# --------------------------------------------------------------------------- 3. auth through the CLI


SECRET_KEY = "sk-e2e-KEYVALUE-9f3a1c"
SECRET_TOKEN = "tok-e2e-TOKENVALUE-77d2"
DEBUG_LOGS = ["hydra.job_logging.root.level=DEBUG", "hydra.job_logging.loggers.httpx.level=DEBUG",
              "hydra.job_logging.loggers.httpcore.level=DEBUG"]


def _two_evals(root: Path) -> Path:
    lines = json.dumps({"id": "c1", "input": "Reply with exactly A.", "ideal": "A"}) + "\n"
    return write_registry(root, evals={"g/a.json": smoke_eval("g.a", "data/g/a/test.jsonl"),
                                       "g/b.json": smoke_eval("g.b", "data/g/b/test.jsonl")},
                          data={"data/g/a/test.jsonl": lines, "data/g/b/test.jsonl": lines})


@pytest.mark.slow
def test_cli_key_and_header_secrets_are_sent_but_never_stored(url: str, wire: str, tmp_path: Path) -> None:
    registry = _two_evals(tmp_path / "reg")
    res = run_cli(f"registry={registry}", *service_args(url), f"service.transport={wire}",
                  "service.api_key_env=EH_E2E_KEY",
                  '+service.headers.X-Token="Bearer ${env:EH_E2E_TOKEN}"', "eval=g", "store.path=s.db",
                  "run.progress=false", "hydra.run.dir=run", *DEBUG_LOGS, cwd=tmp_path,
                  env={"EH_E2E_KEY": SECRET_KEY, "EH_E2E_TOKEN": SECRET_TOKEN})
    assert res.returncode == 0, res.stderr
    headers = mock_call(url, "last_headers")
    assert headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert headers["x-token"] == f"Bearer {SECRET_TOKEN}"
    assert "warning" not in res.stderr
    run_dir = tmp_path / "run"
    log = (run_dir / "evalhydra.log").read_text()
    # the transport's DEBUG lines were written (httpcore's, or evalhydra.http's), yet no secret below
    wrote = "[httpcore" in log if wire == "httpx" else "[evalhydra.http][DEBUG] POST http://" in log
    assert wrote, log
    assert (run_dir / ".hydra" / "config.yaml").exists() and (run_dir / "report.md").exists()
    assert "${env:EH_E2E_TOKEN}" in (run_dir / ".hydra" / "config.yaml").read_text()  # the reference only
    files = [p for p in tmp_path.rglob("*") if p.is_file() and "reg" not in p.relative_to(tmp_path).parts]
    assert any(p.name == "s.db" for p in files)
    for path in files:  # the store (and its -wal), reports, logs, Hydra's saved config
        data = path.read_bytes()
        assert SECRET_KEY.encode() not in data and SECRET_TOKEN.encode() not in data, path
    assert SECRET_KEY not in res.stdout + res.stderr and SECRET_TOKEN not in res.stdout + res.stderr


@pytest.mark.slow
def test_cli_warns_once_when_the_named_key_is_missing(url: str, tmp_path: Path) -> None:
    registry = _two_evals(tmp_path / "reg")
    res = run_cli(f"registry={registry}", *service_args(url), "service.api_key_env=EH_E2E_MISSING",
                  "eval=g", "store.path=s.db", "run.progress=false", "hydra.run.dir=run", cwd=tmp_path,
                  env={"EH_E2E_MISSING": "  "})  # blank counts as missing
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("warning:") == 1 and res.stderr.count("EH_E2E_MISSING") >= 1
    assert "without an Authorization header" in res.stderr
    assert "authorization" not in mock_call(url, "last_headers")
    assert chat_requests(url) == 2  # the seed does not fail: the calls are still made
