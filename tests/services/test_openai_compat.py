"""The OpenAI-compatible service: URL, auth, payload, parsing, retries, limits, cost.

Everything runs against ``httpx.MockTransport`` handlers; tests that sleep use
pytest-trio's ``autojump_clock`` (virtual time).
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from evalhydra.config.schema import PricingConfig, RateLimitConfig, RetryConfig, ServiceConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import ChatRequest, ErrorKind, ToolCall, ToolSpec, Usage, arguments_or_empty
from evalhydra.http.pool import environment_proxy
from evalhydra.services.base import Service
from evalhydra.services.openai import (
    MAX_RESPONSE_BYTES,
    InvalidResponseError,
    OpenAICompatService,
    build_payload,
    missing_api_key_warning,
    normalize_chat_url,
    parse_chat_response,
    resolve_model,
    upstream_error_message,
)
from evalhydra.services.pricing import cost_usd

MiB = 1024 * 1024
Reply = httpx.Response | Exception | Callable[[httpx.Request], Any]


def make_cfg(**overrides: Any) -> ServiceConfig:
    overrides.setdefault("base_url", "http://upstream.test")
    return ServiceConfig(name="svc", **overrides)


def chat_body(content: Any = "OK", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    message.update(extra.pop("message", {}))
    body = {"id": "c1", "object": "chat.completion", "model": "served-model"}
    body["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]  # type: ignore[assignment]
    body.update(extra)
    return body


class Upstream:
    """A scripted MockTransport handler that records requests and virtual times."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.times: list[float] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.times.append(trio.current_time())
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(reply, Exception):
            raise reply
        if callable(reply) and not isinstance(reply, httpx.Response):
            reply = reply(request)
            if not isinstance(reply, httpx.Response):
                reply = await reply
        assert isinstance(reply, httpx.Response)
        return reply

    def json(self, i: int = 0) -> dict[str, Any]:
        return json.loads(self.requests[i].content)


def ok(content: Any = "OK", **extra: Any) -> httpx.Response:
    return httpx.Response(200, json=chat_body(content, **extra))


def status(code: int, body: Any = None, **headers: str) -> httpx.Response:
    return httpx.Response(code, json=body if body is not None else {}, headers=headers)


def service(cfg: ServiceConfig, upstream: Upstream, tmp_path: Path) -> OpenAICompatService:
    return OpenAICompatService(cfg, registry_root=tmp_path, transport=httpx.MockTransport(upstream))


async def call(cfg: ServiceConfig, upstream: Upstream, tmp_path: Path, req: ChatRequest | None = None):  # type: ignore[no-untyped-def]
    svc = service(cfg, upstream, tmp_path)
    try:
        return await svc.complete(req or ChatRequest(user_content="Say OK"))
    finally:
        await svc.aclose()


# ---------------------------------------------------------------- URL


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("http://h:8000", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1/", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1/chat/completions", "http://h:8000/v1/chat/completions"),
        ("https://api.x.ai/openai/chat/completions", "https://api.x.ai/openai/chat/completions"),
        ("https://api.x.ai/openai", "https://api.x.ai/openai/v1/chat/completions"),
        ("  http://h/v1  ", "http://h/v1/chat/completions"),
    ],
)
def test_normalize_chat_url(base: str, url: str) -> None:
    assert normalize_chat_url(base) == url


async def test_base_url_override_and_setter(tmp_path: Path) -> None:
    upstream = Upstream(ok())
    svc = OpenAICompatService(
        make_cfg(),
        registry_root=tmp_path,
        base_url="http://127.0.0.1:9/v1",
        transport=httpx.MockTransport(upstream),
    )
    assert svc.base_url == "http://127.0.0.1:9/v1/chat/completions"
    svc.base_url = "http://127.0.0.1:4321"
    await svc.complete(ChatRequest(user_content="x"))
    assert str(upstream.requests[0].url) == "http://127.0.0.1:4321/v1/chat/completions"
    assert svc.name == "svc"
    assert isinstance(svc, Service)
    await svc.aclose()


# ---------------------------------------------------------------- auth and headers


async def test_bearer_header_when_env_is_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EH_TEST_KEY", "  sk-123 \n")
    upstream = Upstream(ok())
    await call(make_cfg(api_key_env="EH_TEST_KEY"), upstream, tmp_path)
    assert upstream.requests[0].headers["authorization"] == "Bearer sk-123"
    assert upstream.requests[0].headers["content-type"] == "application/json"


@pytest.mark.parametrize("value", [None, "", "   "])
async def test_no_bearer_header_when_env_unset_or_blank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("EH_TEST_KEY", raising=False)
    else:
        monkeypatch.setenv("EH_TEST_KEY", value)
    upstream = Upstream(ok())
    done = await call(make_cfg(api_key_env="EH_TEST_KEY"), upstream, tmp_path)
    assert done.ok
    assert "authorization" not in upstream.requests[0].headers
    warning = missing_api_key_warning(make_cfg(api_key_env="EH_TEST_KEY"))
    assert warning is not None and "EH_TEST_KEY" in warning


def test_no_warning_when_key_set_or_not_expected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EH_TEST_KEY", "sk-1")
    assert missing_api_key_warning(make_cfg(api_key_env="EH_TEST_KEY")) is None
    assert missing_api_key_warning(make_cfg()) is None


async def test_key_is_read_at_call_time_and_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EH_TEST_KEY", "first")
    upstream = Upstream(ok())
    svc = service(make_cfg(api_key_env="EH_TEST_KEY"), upstream, tmp_path)
    await svc.complete(ChatRequest(user_content="x"))
    monkeypatch.setenv("EH_TEST_KEY", "second")
    await svc.complete(ChatRequest(user_content="x"))
    assert [r.headers["authorization"] for r in upstream.requests] == ["Bearer first", "Bearer second"]
    assert "second" not in repr(vars(svc)) and "second" not in repr(vars(svc.headers))
    await svc.aclose()


async def test_env_headers_resolved_per_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EH_ORG", "org-9")
    monkeypatch.delenv("EH_UNSET", raising=False)
    headers = {"X-Org": "${env:EH_ORG}", "X-Gone": "k=${env:EH_UNSET}", "X-Static": "s"}
    upstream = Upstream(ok())
    await call(make_cfg(headers=headers), upstream, tmp_path)
    sent = upstream.requests[0].headers
    assert sent["x-org"] == "org-9"
    assert sent["x-static"] == "s"
    assert "x-gone" not in sent  # a header whose variable is unset is left out


async def test_configured_authorization_header_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EH_TEST_KEY", "sk-env")
    upstream = Upstream(ok())
    cfg = make_cfg(api_key_env="EH_TEST_KEY", headers={"Authorization": "Token abc"})
    await call(cfg, upstream, tmp_path)
    assert upstream.requests[0].headers["authorization"] == "Token abc"


# ---------------------------------------------------------------- payload


def test_payload_minimal() -> None:
    payload = build_payload(make_cfg(), ChatRequest(user_content="hi"))
    assert payload == {
        "model": "mock-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
    }
    assert list(payload) == ["model", "messages", "stream"]


def test_payload_full() -> None:
    cfg = make_cfg(
        model="m-sweep",
        system_prompt="Be brief.",
        provider="openrouter",
        params={"temperature": 0.2, "max_tokens": 10},
    )
    tool = ToolSpec("lookup", "Look up a word", {"type": "object", "properties": {}})
    req = ChatRequest(user_content=[{"type": "text", "text": "hi"}], tools=(tool,), params={"temperature": 0})
    payload = build_payload(cfg, req)
    assert payload == {
        "model": "m-sweep",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Look up a word",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
        "stream": False,
        "provider": "openrouter",
        "temperature": 0,
        "max_tokens": 10,
    }


@pytest.mark.parametrize(
    ("service_prompt", "request_prompt", "expected"),
    [
        ("svc", None, "svc"),
        ("svc", "req", "req"),
        ("svc", "  ", None),  # an explicit blank override removes the system message
        ("  ", None, None),
        (None, None, None),
    ],
)
def test_payload_system_prompt(
    service_prompt: str | None, request_prompt: str | None, expected: str | None
) -> None:
    cfg = make_cfg(system_prompt=service_prompt)
    messages = build_payload(cfg, ChatRequest(user_content="u", system_prompt=request_prompt))["messages"]
    system = [m["content"] for m in messages if m["role"] == "system"]
    assert system == ([expected] if expected else [])


def test_model_precedence() -> None:
    assert resolve_model(make_cfg()) == "mock-model"
    assert resolve_model(make_cfg(model="swept")) == "swept"
    assert resolve_model(make_cfg(model="swept"), ChatRequest(user_content="", model="req")) == "req"
    assert build_payload(make_cfg(provider="  "), ChatRequest(user_content="")).get("provider") is None


async def test_unencodable_params_are_a_render_error(tmp_path: Path) -> None:
    upstream = Upstream(ok())
    done = await call(make_cfg(params={"temperature": float("nan")}), upstream, tmp_path)
    assert done.error_kind is ErrorKind.RENDER_ERROR
    assert done.error_message is not None and done.error_message.startswith("InvalidPayload")
    assert upstream.requests == []


# ---------------------------------------------------------------- responses


async def test_success_with_usage_and_cost(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 200, "prompt_tokens_details": {"cached_tokens": 400}}
    pricing = PricingConfig(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
    upstream = Upstream(ok("Hello", usage=usage))
    done = await call(make_cfg(pricing=pricing), upstream, tmp_path)
    assert done.ok and done.output == "Hello"
    assert done.model == "served-model"
    assert done.status_code == 200
    assert done.usage == Usage(1000, 200, 400)
    assert done.cost_usd == pytest.approx((600 * 2.0 + 400 * 0.5 + 200 * 8.0) / 1e6)
    assert (done.attempt_count, done.retried) == (1, False)
    assert len(done.attempts) == 1 and done.attempts[0].status_code == 200


def test_cost_without_cached_price_uses_input_price() -> None:
    pricing = PricingConfig(input_per_mtok=3.0, output_per_mtok=15.0)
    assert cost_usd(Usage(1_000_000, 1_000_000, 500_000), pricing) == pytest.approx(18.0)
    assert cost_usd(Usage(), pricing) == 0.0


def test_parse_tool_calls_and_null_content() -> None:
    calls = [{"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": '{"w": "x"}'}}]
    body = json.dumps(chat_body(None, message={"tool_calls": calls})).encode()
    answer = parse_chat_response(body, "asked")
    assert answer.output == ""
    assert answer.tool_calls == (ToolCall("lookup", '{"w": "x"}', "t1"),)  # the provider's id kept
    assert answer.usage == Usage()


def test_arguments_missing_empty_or_an_object_kept_as_sent() -> None:
    """Issue 51, item 5 and issue 60, item 3: no arguments, ``""`` and an object (as some servers
    send them) are kept as sent; tool loops read an empty or blank string as ``{}``."""
    cases = ((None, ToolCall("f", "")), ("", ToolCall("f", "")), ("  ", ToolCall("f", "  ")),
             ({"a": "ü"}, ToolCall("f", '{"a": "ü"}', None, True)))
    for arguments, expected in cases:
        function = {"name": "f"} if arguments is None else {"name": "f", "arguments": arguments}
        body = {"choices": [{"message": {"content": None, "tool_calls": [{"function": function}]}}]}
        (call,) = parse_chat_response(json.dumps(body).encode(), "m").tool_calls
        assert call == expected
        read = json.loads(arguments_or_empty(call.arguments))
        assert read == (arguments if isinstance(arguments, dict) else {})


def test_parse_absent_content_needs_tool_calls() -> None:
    calls = [{"function": {"name": "f", "arguments": "{}"}}]
    with_calls = {"model": "m", "choices": [{"message": {"role": "assistant", "tool_calls": calls}}]}
    assert parse_chat_response(json.dumps(with_calls).encode(), "m").tool_calls == (ToolCall("f", "{}"),)
    bare = {"choices": [{"message": {"role": "assistant"}}]}
    with pytest.raises(InvalidResponseError, match="MalformedSuccessPayload"):
        parse_chat_response(json.dumps(bare).encode(), "m")


def test_parse_model_fallback() -> None:
    body = {"choices": [{"message": {"content": "x"}}]}
    assert parse_chat_response(json.dumps(body).encode(), "asked").model == "asked"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>oops</html>", "InvalidUpstreamJson"),
        (b"\xff\xfe", "InvalidUpstreamJson"),
        (b"[1, 2]", "InvalidUpstreamJson"),
        (b"{}", "MalformedSuccessPayload"),
        (b'{"choices": []}', "MalformedSuccessPayload"),
        (b'{"choices": [{"text": "legacy"}]}', "MalformedSuccessPayload"),
        (b'{"choices": [{"message": {"content": 5}}]}', "MalformedSuccessPayload"),
        (
            b'{"choices": [{"message": {"content": "", "tool_calls": [{"function": {"name": 5}}]}}]}',
            "MalformedSuccessPayload",
        ),
    ],
)
async def test_bad_success_bodies_are_invalid_response(tmp_path: Path, body: bytes, reason: str) -> None:
    upstream = Upstream(httpx.Response(200, content=body))
    cfg = make_cfg(retry=RetryConfig(max_attempts=3))
    done = await call(cfg, upstream, tmp_path)
    assert done.error_kind is ErrorKind.INVALID_RESPONSE
    assert done.error_message == reason
    assert done.status_code == 200
    assert done.output == "" and done.model == "mock-model"
    assert len(upstream.requests) == 1  # not retried


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": {"message": "bad key", "type": "auth"}}, "bad key"),
        ({"error": "plain text error"}, "plain text error"),
        ({"error": {"code": 7}}, "UpstreamHttpError"),
        ({"detail": "x"}, "UpstreamHttpError"),
    ],
)
async def test_final_http_error_reason(tmp_path: Path, body: dict[str, Any], message: str) -> None:
    done = await call(make_cfg(), Upstream(status(401, body)), tmp_path)
    assert done.error_kind is ErrorKind.CLIENT_ERROR
    assert done.error_message == message
    assert done.status_code == 401


@pytest.mark.parametrize("code", [201, 202, 204, 299])
async def test_a_2xx_other_than_200_is_a_failed_call_as_in_zig_eval(tmp_path: Path, code: int) -> None:
    done = await call(make_cfg(), Upstream(httpx.Response(code, json=chat_body("OK"))), tmp_path)
    assert done.error_kind is ErrorKind.CLIENT_ERROR and done.output == ""
    assert (done.error_message, done.status_code) == ("UpstreamHttpError", code)
    quoted = await call(make_cfg(), Upstream(status(201, {"error": {"message": "queued"}})), tmp_path)
    assert quoted.error_message == "queued"


def test_upstream_error_message_non_json() -> None:
    assert upstream_error_message(b"Bad Gateway") == "UpstreamHttpError"
    assert upstream_error_message(b"") == "UpstreamHttpError"


async def _endless_megabytes(counter: list[int]) -> AsyncIterator[bytes]:
    while True:
        counter[0] += 1
        yield b"x" * MiB


# Stopping mid-body leaves httpx's nested body generators (aiter_raw, the transport
# stream) for trio to finalize, which it reports as a ResourceWarning.
@pytest.mark.filterwarnings("ignore:Async generator:ResourceWarning")
async def test_streamed_oversized_body_stops_reading(tmp_path: Path) -> None:
    counter = [0]
    upstream = Upstream(lambda _req: httpx.Response(200, content=_endless_megabytes(counter)))
    done = await call(make_cfg(), upstream, tmp_path)
    assert done.error_kind is ErrorKind.INVALID_RESPONSE
    assert done.error_message == "ResponseTooLarge"
    assert counter[0] == MAX_RESPONSE_BYTES // MiB + 1  # stopped just past 8 MiB


async def test_declared_oversized_body_is_rejected_unread(tmp_path: Path) -> None:
    upstream = Upstream(httpx.Response(200, content=b"x" * (MAX_RESPONSE_BYTES + 1)))
    done = await call(make_cfg(), upstream, tmp_path)
    assert done.error_kind is ErrorKind.INVALID_RESPONSE
    assert done.error_message == "ResponseTooLarge"


async def test_body_of_exactly_8_mib_is_read(tmp_path: Path) -> None:
    text = json.dumps(chat_body("big"))
    padded = text[:-1] + ',"pad":"' + "p" * (MAX_RESPONSE_BYTES - len(text) - 9) + '"}'
    assert len(padded) == MAX_RESPONSE_BYTES
    done = await call(make_cfg(), Upstream(httpx.Response(200, content=padded.encode())), tmp_path)
    assert done.ok and done.output == "big"


# ---------------------------------------------------------------- retries


async def test_503_503_200_retries_with_linear_sleeps(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    upstream = Upstream(status(503), status(503), ok())
    cfg = make_cfg(retry=RetryConfig(max_attempts=3, backoff_ms=100))
    done = await call(cfg, upstream, tmp_path)
    assert done.ok
    assert (done.attempt_count, done.retried) == (3, True)
    assert upstream.times == pytest.approx([0.0, 0.1, 0.3])
    assert [(a.attempt, a.status_code, a.error_kind) for a in done.attempts] == [
        (1, 503, ErrorKind.SERVER_ERROR),
        (2, 503, ErrorKind.SERVER_ERROR),
        (3, 200, None),
    ]
    assert done.latency_ms == pytest.approx(300.0)


async def test_retries_exhausted_reports_last_status(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    upstream = Upstream(status(429, {"error": {"message": "slow down"}}))
    cfg = make_cfg(retry=RetryConfig(max_attempts=2, backoff_ms=50), rate_limit_timeout_s=0)
    done = await call(cfg, upstream, tmp_path)
    assert done.error_kind is ErrorKind.RATE_LIMITED
    assert done.error_message == "slow down"
    assert (done.status_code, done.attempt_count, done.retried) == (429, 2, True)


async def test_400_is_not_retried(tmp_path: Path) -> None:
    upstream = Upstream(status(400, {"error": {"message": "bad request"}}), ok())
    done = await call(make_cfg(retry=RetryConfig(max_attempts=3)), upstream, tmp_path)
    assert done.error_kind is ErrorKind.CLIENT_ERROR
    assert (done.attempt_count, done.retried, len(upstream.requests)) == (1, False, 1)


async def test_unlisted_status_is_not_retried(tmp_path: Path) -> None:
    cfg = make_cfg(retry=RetryConfig(max_attempts=3, retry_on_status=[503]))
    done = await call(cfg, Upstream(status(500)), tmp_path)
    assert (done.error_kind, done.attempt_count) == (ErrorKind.SERVER_ERROR, 1)


async def test_transport_errors_are_retried(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    upstream = Upstream(httpx.ConnectError("refused"), httpx.ReadError("reset"), ok())
    done = await call(make_cfg(retry=RetryConfig(max_attempts=3, backoff_ms=10)), upstream, tmp_path)
    assert done.ok and done.attempt_count == 3
    assert [a.error_kind for a in done.attempts] == [ErrorKind.CONNECT_ERROR, ErrorKind.SERVER_ERROR, None]
    assert [a.status_code for a in done.attempts] == [None, None, 200]


async def test_final_transport_error_is_named_with_no_status(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    upstream = Upstream(httpx.ConnectError("[Errno 111] Connection refused"))
    done = await call(make_cfg(retry=RetryConfig(max_attempts=2)), upstream, tmp_path)
    assert done.error_kind is ErrorKind.CONNECT_ERROR
    assert done.error_message == "ConnectError"
    assert done.status_code is None
    assert done.attempts[-1].error_message == "ConnectError: [Errno 111] Connection refused"


async def test_request_timeout_is_retried(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async def hang(_req: httpx.Request) -> httpx.Response:
        await trio.sleep_forever()
        raise AssertionError

    upstream = Upstream(hang, ok())
    cfg = make_cfg(timeout_ms=500, retry=RetryConfig(max_attempts=2, backoff_ms=100))
    done = await call(cfg, upstream, tmp_path)
    assert done.ok
    assert done.attempts[0].error_kind is ErrorKind.TIMEOUT
    assert upstream.times == pytest.approx([0.0, 0.6])


async def test_final_timeout(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async def hang(_req: httpx.Request) -> httpx.Response:
        await trio.sleep(3600)
        return ok()

    done = await call(make_cfg(timeout_ms=1000), Upstream(hang), tmp_path)
    assert (done.error_kind, done.error_message, done.status_code) == (ErrorKind.TIMEOUT, "Timeout", None)
    assert done.latency_ms == pytest.approx(1000.0)


async def test_retry_after_seconds_is_honoured(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    upstream = Upstream(status(429, **{"Retry-After": "2"}), ok())
    done = await call(make_cfg(retry=RetryConfig(max_attempts=2, backoff_ms=100)), upstream, tmp_path)
    assert done.ok
    assert upstream.times == pytest.approx([0.0, 2.0])


async def test_retry_after_http_date_is_honoured(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    upstream = Upstream(status(503, **{"Retry-After": when}), ok())
    done = await call(make_cfg(retry=RetryConfig(max_attempts=2, backoff_ms=100)), upstream, tmp_path)
    assert done.ok
    assert 3.9 <= upstream.times[1] <= 5.0  # the date has one-second resolution


async def test_retry_after_is_capped(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    # within service.rate_limit_timeout_s (600 s): waited, capped (a longer one is a spent quota)
    upstream = Upstream(status(429, **{"Retry-After": "300"}), ok())
    retry = RetryConfig(max_attempts=2, backoff_ms=100, retry_after_cap_ms=1500)
    await call(make_cfg(retry=retry), upstream, tmp_path)
    assert upstream.times == pytest.approx([0.0, 1.5])


async def test_exponential_strategy_sleeps_within_bounds(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    upstream = Upstream(status(503))
    retry = RetryConfig(max_attempts=6, backoff_ms=100, strategy="exponential", max_backoff_ms=500)
    done = await call(make_cfg(retry=retry), upstream, tmp_path)
    assert done.attempt_count == 6
    gaps = [b - a for a, b in zip(upstream.times, upstream.times[1:], strict=False)]
    for attempt, gap in enumerate(gaps, start=1):
        assert 0.0 <= gap <= min(0.5, 0.1 * 2 ** (attempt - 1)) + 1e-9


async def test_deadline_bounds_all_attempts(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async def slow_503(_req: httpx.Request) -> httpx.Response:
        await trio.sleep(0.4)
        return status(503)

    upstream = Upstream(slow_503)
    retry = RetryConfig(max_attempts=10, backoff_ms=100)
    done = await call(make_cfg(deadline_ms=1000, retry=retry), upstream, tmp_path)
    # attempts start at 0.0 and 0.5 (0.4 s answer + 0.1 s sleep); the third would
    # start at 1.1, so the call ends after the second one, at 0.9 s.
    assert upstream.times == pytest.approx([0.0, 0.5])
    assert done.error_kind is ErrorKind.SERVER_ERROR and done.attempt_count == 2
    assert trio.current_time() <= 1.0


async def test_deadline_cuts_a_hanging_attempt(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def hang(_req: httpx.Request) -> httpx.Response:
        await trio.sleep(3600)
        return ok()

    done = await call(make_cfg(deadline_ms=2000, retry=RetryConfig(max_attempts=5)), Upstream(hang), tmp_path)
    assert (done.error_kind, done.error_message) == (ErrorKind.TIMEOUT, "DeadlineExceeded")
    assert done.latency_ms == pytest.approx(2000.0)
    assert trio.current_time() == pytest.approx(2.0)


async def test_cancellation_propagates(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async def hang(_req: httpx.Request) -> httpx.Response:
        await trio.sleep_forever()
        raise AssertionError

    svc = service(make_cfg(retry=RetryConfig(max_attempts=3)), Upstream(hang), tmp_path)
    with trio.move_on_after(5) as scope:
        await svc.complete(ChatRequest(user_content="x"))
        pytest.fail("complete() swallowed the cancellation")
    assert scope.cancelled_caught
    await svc.aclose()


# ---------------------------------------------------------------- limits and pool


async def test_tpm_is_charged_then_corrected(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    usage = {"prompt_tokens": 70, "completion_tokens": 30}
    svc = service(make_cfg(rate_limit=RateLimitConfig(tpm=10_000)), Upstream(ok(usage=usage)), tmp_path)
    await svc.complete(ChatRequest(user_content="x" * 4000))
    assert svc._rate.tokens is not None
    assert svc._rate.tokens.tokens == pytest.approx(10_000 - 100)
    await svc.aclose()


async def test_rpm_paces_calls(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    upstream = Upstream(ok())
    svc = service(make_cfg(rate_limit=RateLimitConfig(rpm=60), max_concurrency=200), upstream, tmp_path)
    async with trio.open_nursery() as nursery:
        for _ in range(120):
            nursery.start_soon(svc.complete, ChatRequest(user_content="x"))
    assert len(upstream.requests) == 120
    assert max(upstream.times) >= 59.0
    await svc.aclose()


async def test_concurrency_is_capped(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    in_flight = peak = 0

    async def slow(_req: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await trio.sleep(1)
        in_flight -= 1
        return ok()

    svc = service(make_cfg(max_concurrency=3), Upstream(slow), tmp_path)
    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(svc.complete, ChatRequest(user_content="x"))
    assert peak == 3
    await svc.aclose()


async def test_httpx_connection_pool_is_sharded(tmp_path: Path) -> None:
    svc = OpenAICompatService(make_cfg(max_concurrency=64, transport="httpx"), registry_root=tmp_path)
    pool = svc._pool
    assert len(pool.transports) == 4
    svc_small = OpenAICompatService(make_cfg(max_concurrency=5, transport="httpx"), registry_root=tmp_path)
    assert len(svc_small._pool.transports) == 1
    leased = [pool.acquire(), pool.acquire(), pool.acquire()]
    assert len(set(leased)) == 3  # least-loaded: spread over idle shards
    assert pool.in_flight == [1, 1, 1, 0]
    for index in leased:
        pool.release(index)
    assert pool.in_flight == [0, 0, 0, 0]
    await svc.aclose()
    await svc_small.aclose()
    await svc.aclose()  # idempotent


async def test_lean_transport_is_one_pool_sized_by_max_concurrency(tmp_path: Path) -> None:
    svc = OpenAICompatService(make_cfg(max_concurrency=64), registry_root=tmp_path)
    assert svc._pool.kind == "lean"
    assert [type(t).__name__ for t in svc._pool.transports] == ["LeanTransport"]
    assert svc._pool.transports[0]._slots.value == 64  # type: ignore[attr-defined]
    await svc.aclose()


async def test_a_proxied_service_uses_httpx(tmp_path: Path) -> None:
    svc = OpenAICompatService(make_cfg(proxy="http://127.0.0.1:9"), registry_root=tmp_path)
    assert svc._pool.kind == "httpx"
    assert all(isinstance(t, httpx.AsyncHTTPTransport) for t in svc._pool.transports)
    await svc.aclose()


def test_an_unknown_transport_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(EvalHydraError, match="service.transport 'laen'") as info:
        OpenAICompatService(make_cfg(transport="laen"), registry_root=tmp_path)
    assert "Did you mean: lean?" in str(info.value.hint)


@pytest.mark.parametrize(("env", "url", "expected"), [
    ({"HTTPS_PROXY": "http://proxy:3128"}, "https://api.example.com/v1", "http://proxy:3128"),
    ({"HTTPS_PROXY": "http://proxy:3128"}, "http://api.example.com/v1", None),
    ({"ALL_PROXY": "http://all:1"}, "http://api.example.com/v1", "http://all:1"),
    ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "example.com"}, "https://api.example.com/v1", None),
    ({}, "https://api.example.com/v1", None),
])
def test_environment_proxy_follows_the_usual_variables(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, expected: str | None
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert environment_proxy(url) == expected


async def test_compressed_replies_are_decoded_and_requests_name_evalhydra(tmp_path: Path) -> None:
    import gzip

    from evalhydra import __version__

    raw = gzip.compress(json.dumps(chat_body("zipped")).encode())
    upstream = Upstream(httpx.Response(200, content=raw, headers={
        "content-encoding": "gzip", "content-type": "application/json", "content-length": str(len(raw))}))
    done = await call(make_cfg(headers={"X-Team": "evals"}), upstream, tmp_path)
    assert done.ok and done.output == "zipped"
    sent = upstream.requests[0].headers
    assert sent["user-agent"] == f"evalhydra/{__version__}" and "gzip" in sent["accept-encoding"]
    assert sent["x-team"] == "evals" and sent["content-type"] == "application/json"
    assert sent["host"] == "upstream.test" and int(sent["content-length"]) > 0


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_replies_are_capped_by_what_they_decode_to(tmp_path: Path, encoding: str) -> None:
    """64 MiB of JSON that compresses to ~64 KiB is refused as ResponseTooLarge, never stored as output."""
    import gzip
    import zlib

    body = json.dumps(chat_body("x" * (64 << 20))).encode()
    raw = {"gzip": gzip.compress, "deflate": zlib.compress,
           "raw-deflate": lambda b: zlib.compress(b)[2:-4]}[encoding](body)
    assert len(raw) < 1 << 20
    headers = {"content-encoding": encoding.replace("raw-", ""), "content-type": "application/json",
               "content-length": str(len(raw))}
    reply = httpx.Response(200, stream=_Chunks(raw), headers=headers)
    done = await call(make_cfg(), Upstream(reply), tmp_path)
    assert (done.ok, done.error_kind, done.error_message, done.output) == (
        False, ErrorKind.INVALID_RESPONSE, "ResponseTooLarge", "")
    small = {"gzip": gzip.compress, "deflate": zlib.compress,
             "raw-deflate": lambda b: zlib.compress(b)[2:-4]}[encoding](json.dumps(chat_body("ok")).encode())
    headers["content-length"] = str(len(small))
    reply = httpx.Response(200, stream=_Chunks(small), headers=headers)
    done = await call(make_cfg(), Upstream(reply), tmp_path)
    assert done.ok and done.output == "ok"


class _Chunks(httpx.AsyncByteStream):
    """A streamed body in 64 KiB chunks, as a socket delivers it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        if self.at >= len(self.data):
            raise StopAsyncIteration
        self.at += 1 << 16
        return self.data[self.at - (1 << 16):self.at]


async def test_a_gateway_that_echoes_the_key_cannot_leak_it(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALHYDRA_TEST_KEY", "sk-live-abcdef123")
    monkeypatch.setenv("EVALHYDRA_TEST_TOKEN", "tok-zyxwvu987")
    cfg = make_cfg(api_key_env="EVALHYDRA_TEST_KEY", headers={"X-Token": "${env:EVALHYDRA_TEST_TOKEN}"},
                   retry=RetryConfig(max_attempts=2, backoff_ms=0, retry_on_status=[401]))
    echo = {"error": {"message": "Incorrect API key provided: sk-live-abcdef123 (token tok-zyxwvu987)"}}
    done = await call(cfg, Upstream(httpx.Response(401, json=echo), httpx.Response(401, json=echo)), tmp_path)
    assert done.error_message == "Incorrect API key provided: *** (token ***)"
    assert all("sk-live" not in (a.error_message or "") for a in done.attempts) and len(done.attempts) == 2
    upstream = Upstream(httpx.Response(200, json=chat_body("your key is sk-live-abcdef123")))
    done = await call(cfg, upstream, tmp_path)
    assert done.ok and done.output == "your key is ***"
    assert upstream.requests[0].headers["authorization"] == "Bearer sk-live-abcdef123"  # sent, never kept


async def test_a_request_sent_again_reuses_its_body_and_a_new_one_is_encoded(tmp_path: Path) -> None:
    upstream = Upstream(ok())
    svc = service(make_cfg(), upstream, tmp_path)
    first, second = ChatRequest(user_content="Say A"), ChatRequest(user_content="Say B")
    try:
        for request in (first, first, second, first):
            assert (await svc.complete(request)).ok
    finally:
        await svc.aclose()
    sent = [upstream.json(i)["messages"][-1]["content"] for i in range(4)]
    assert sent == ["Say A", "Say A", "Say B", "Say A"]
    lengths = {int(r.headers["content-length"]) for r in upstream.requests}
    assert lengths == {len(r.content) for r in upstream.requests}
