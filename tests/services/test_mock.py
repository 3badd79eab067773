"""The built-in mock server: deterministic replies, fault switches, endpoints, CLI.

Reply rules are tested on the pure :func:`reply_for`; everything else runs a
real server on 127.0.0.1 inside the test's nursery and talks to it with httpx
(or raw sockets, for framing), plus one subprocess for the CLI and the sync
``openai`` client.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import openai
import pytest
import trio

from evalhydra.config.schema import MockConfig
from evalhydra.services.mock import FAULTS, MockServer, MockSettings, open_mock_server, reply_for, serve
from evalhydra.services.mock.__main__ import build_parser
from evalhydra.services.mock.replies import usage_for
from evalhydra.services.mock.wire import parse_head
from tests.conftest import AIWG_FIXTURE

AIWG = AIWG_FIXTURE
SEARCH_WEB = {
    "type": "function",
    "function": {
        "name": "search_web",
        "description": "Search the web for current information.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}


def user(text: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def content(payload: dict[str, Any]) -> Any:
    return reply_for(payload)["content"]


def grading_prompt(output: str, ideal: str | None, passing: float = 0.8) -> str:
    """The zig_eval model_grade prompt, sections separated by blank lines."""
    return "\n\n".join(
        [
            "You are grading an LLM or product response for an eval.",
            "Rubric:\nGrade the candidate summary from 0 to 1.",
            f"Passing score:\n{passing:.3f}",
            "Eval input:\nSummarize the change.",
            f"Candidate output:\n{output}",
            f"Ideal answer:\n{ideal if ideal is not None else 'No ideal answer was provided.'}",
            'Return JSON only with this exact shape:\n{"score":0.0,"passed":false,"reason":"x"}',
            "Score must be between 0 and 1. Set passed to true only when score is greater "
            "than or equal to the passing score.",
        ]
    )


def aiwg_evaluator(template: str, input_: str, output: str) -> dict[str, Any]:
    """Render an aiwg evaluator prompt file into a chat payload."""
    text = (AIWG / template).read_text()
    system = text.split("## System", 1)[1].split("## User", 1)[0].strip()
    user_text = text.split("## User", 1)[1].strip()
    user_text = user_text.replace("{{input}}", input_).replace("{{output}}", output)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user_text}]
    return {"model": "judge", "messages": messages}


@pytest.fixture
async def server(nursery: trio.Nursery) -> MockServer:
    started: MockServer = await nursery.start(serve, MockSettings())
    return started


@pytest.fixture
async def client(server: MockServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
        yield http


async def chat(http: httpx.AsyncClient, payload: dict[str, Any] | None = None) -> httpx.Response:
    return await http.post("/chat/completions", json=payload or user("hello"))


async def configure(http: httpx.AsyncClient, **changes: Any) -> None:
    response = await http.post("/_mock/config", json=changes)
    assert response.status_code == 200, response.text


# -- reply rules (pure) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Reply with exactly OK.", "OK"),
        ("Reply with exactly READY.", "READY"),
        ("reply WITH exactly done", "done"),
        ('Reply with exactly "hi there". Nothing else.', "hi there"),
        ("Reply with exactly 3.14.", "3.14"),
    ],
)
def test_reply_with_exactly(prompt: str, expected: str) -> None:
    assert content(user(prompt)) == expected


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Return a JSON object with an answer field set to OK.", '{"answer": "OK"}'),
        ("Return a JSON object with an answer field set to READY.", '{"answer": "READY"}'),
        ("Return JSON with a city field set to Paris.", '{"city": "Paris"}'),
        ("Give me json please", '{"answer": "Give me json please"}'),
    ],
)
def test_json_replies(prompt: str, expected: str) -> None:
    assert content(user(prompt)) == expected


def test_response_format_forces_json() -> None:
    assert content(user("hi", response_format={"type": "json_object"})) == '{"answer": "hi"}'
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}},
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    assert json.loads(content(user("hi", response_format=fmt))) == {"answer": "hi", "n": 1}


def test_echo_and_content_parts() -> None:
    assert content(user("Tell me a story.")) == "Tell me a story."
    parts = [
        {"type": "text", "text": "What object is shown?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "Be brief."},
    ]
    assert content(user(parts)) == "What object is shown?\nBe brief."
    payload = {"messages": [{"role": "user", "content": "first"}, {"role": "user", "content": "last"}]}
    assert content(payload) == "last"


def test_tool_call_for_the_search_web_fixture() -> None:
    message = reply_for(user("Search the web for the weather in Melbourne.", tools=[SEARCH_WEB]))
    assert message["content"] is None
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "search_web", "arguments": '{"query":"weather melbourne"}'}


def test_tool_arguments_by_type_and_choice() -> None:
    params = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array"},
            "opts": {"type": "object"},
            "unit": {"type": "string", "enum": ["c", "f"]},
        },
        "required": ["n", "x", "ok", "tags", "opts", "unit"],
    }
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": params}}
    message = reply_for(user("Please call get_weather now.", tools=[tool]))
    arguments = json.loads(message["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"n": 1, "x": 1.0, "ok": True, "tags": [], "opts": {}, "unit": "c"}
    assert content(user("get weather", tools=[tool], tool_choice="none")) == "get weather"
    assert content(user("Tell me a joke.", tools=[tool])) == "Tell me a joke."
    forced = user("Tell me a joke.", tools=[tool], tool_choice="required")
    assert reply_for(forced)["tool_calls"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize(
    ("output", "ideal", "score", "passed"),
    [
        ("OK", "OK", 1.0, True),
        ("The object is a Red Mug.", "red mug", 1.0, True),
        ("mug", "a red mug", 1.0, True),
        ("Summarize this change for a product changelog: ...", "Mentions retry metadata.", 0.0, False),
        ("", "OK", 0.0, False),
        ("anything", None, 1.0, True),
        ("", None, 0.0, False),
    ],
)
def test_zig_eval_model_grade_judge(output: str, ideal: str | None, score: float, passed: bool) -> None:
    verdict = json.loads(content(user(grading_prompt(output, ideal))))
    assert verdict["score"] == score and verdict["passed"] is passed
    assert isinstance(verdict["reason"], str) and verdict["reason"].strip()
    assert set(verdict) == {"score", "passed", "reason"}


def test_model_grade_respects_the_passing_score() -> None:
    verdict = json.loads(content(user(grading_prompt("OK", "OK", passing=1.0))))
    assert verdict == {"score": 1.0, "passed": True, "reason": verdict["reason"]}


def test_aiwg_rubric_evaluator_passes_good_output() -> None:
    payload = aiwg_evaluator("templates_eval-loop_evaluator.prompt.md", "Write a haiku.", "A calm sea")
    verdict = json.loads(content(payload))
    assert verdict["rubric_scores"] == {
        "relevance": 1.0,
        "completeness": 1.0,
        "accuracy": 1.0,
        "format": 1.0,
    }
    assert verdict["score"] == 1.0 and verdict["pass"] is True
    assert verdict["feedback"] == "" and verdict["failure_category"] is None


def test_aiwg_rubric_evaluator_fails_bad_output_and_fences() -> None:
    payload = aiwg_evaluator(
        "templates_simple-chain_evaluator.prompt.md", "ACME MOCK_FENCE", '{"name": "BAD"}'
    )
    text = content(payload)
    assert text.startswith("```json\n") and text.endswith("\n```")
    verdict = json.loads(text.removeprefix("```json\n").removesuffix("\n```"))
    assert set(verdict["rubric_scores"]) == {"format", "completeness", "accuracy", "no_hallucination"}
    assert verdict["score"] == 0.3 and verdict["pass"] is False
    assert verdict["feedback"] == "Output contains BAD content"
    assert verdict["failure_category"] == "content"
    assert verdict["suggested_fix"] == "Remove BAD content"


def test_refinement_drops_bad_so_attempt_two_passes() -> None:
    assert content(user("Write BAD prose.")) == "Write BAD prose."
    retry = "Previous attempt was insufficient. Feedback: Output contains BAD content\n\n"
    assert content(user(retry + "Original request: Write BAD prose.")) == "Write prose."
    assert content(user(retry + "Original request: Reply with exactly BAD OK.")) == "OK"


def test_usage_is_deterministic() -> None:
    payload = {
        "messages": [
            {"role": "system", "content": "s" * 10},
            {"role": "user", "content": "u" * 30},
        ]
    }
    usage = usage_for(payload, {"role": "assistant", "content": "c" * 9})
    assert usage == {
        "prompt_tokens": 10,
        "completion_tokens": 3,
        "total_tokens": 13,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    with_tools = usage_for(dict(payload, tools=[SEARCH_WEB]), {"content": ""})
    assert with_tools["prompt_tokens"] > 10 and with_tools["completion_tokens"] == 1


# -- settings ---------------------------------------------------------------------


def test_settings_from_config_and_update() -> None:
    cfg = MockConfig(enabled=True, latency_ms=5, fail_rate=0.5, retry_after_s=2, seed=7)
    settings = MockSettings.from_config(cfg)
    assert (settings.latency_ms, settings.fail_rate, settings.retry_after_s) == (5.0, 0.5, 2)
    assert MockSettings.from_config({"enabled": False, "fail_status": 429}).fail_status == 429
    with pytest.raises(ValueError, match="unknown mock setting 'nope'"):
        MockSettings.from_config({"nope": 1})
    with pytest.raises(ValueError, match="hang_rate must be between 0 and 1"):
        settings.update({"fail_rate": 0.1, "hang_rate": 2})
    assert settings.fail_rate == 0.5  # all or nothing
    with pytest.raises(ValueError, match="fault must be one of"):
        settings.update({"fault": "explode"})


def test_help_documents_every_switch() -> None:
    text = build_parser().format_help()
    for name in MockSettings.__dataclass_fields__:
        assert "--" + name.replace("_", "-") in text
    for fault in FAULTS:
        assert fault in text


def test_parse_head_sends_unusual_requests_to_h11() -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12"
    assert parse_head(head) == (b"POST", b"/v1/chat/completions", 12, True)
    assert parse_head(head + b"\r\nConnection: close") == (b"POST", b"/v1/chat/completions", 12, False)
    assert parse_head(head + b"\r\nTransfer-Encoding: chunked") is None
    assert parse_head(b"GET / HTTP/1.0\r\nHost: x") is None
    assert parse_head(b"GET / HTTP/1.1") is None  # no Host: h11 answers 400


# -- the server -------------------------------------------------------------------


async def test_chat_completion_shape(client: httpx.AsyncClient, server: MockServer) -> None:
    response = await chat(client, user("Reply with exactly OK.", model="gpt-test"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == "gpt-test" and isinstance(body["created"], int)
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "OK"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert body["usage"]["total_tokens"] == 7
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    short = await client.post(f"http://127.0.0.1:{server.port}/chat/completions", json=user("x"))
    assert short.json()["choices"][0]["message"]["content"] == "x"


async def test_tool_call_over_http(client: httpx.AsyncClient) -> None:
    payload = user("Search the web for the weather in Melbourne.", tools=[SEARCH_WEB])
    choice = (await chat(client, payload)).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "search_web"


async def test_models_and_unknown_paths(client: httpx.AsyncClient) -> None:
    models = (await client.get("/models")).json()
    assert models["object"] == "list" and models["data"][0]["id"] == "mock-model"
    assert (await client.get("/nope")).status_code == 404
    assert (await client.get("/chat/completions")).status_code == 405
    bad = await client.post("/chat/completions", content=b"{not json")
    assert bad.status_code == 400 and "error" in bad.json()


async def test_stats_reset_config_and_last(client: httpx.AsyncClient, server: MockServer) -> None:
    for _ in range(3):
        await chat(client)
    await client.post("/chat/completions", content=b"[]")
    stats = (await client.get("/_mock/stats")).json()
    assert stats["chat_requests"] == 4 and stats["ok"] == 3 and stats["bad_requests"] == 1
    assert stats["requests"] == 5 and stats["connections"] == 1
    assert (await client.get("/_mock/last")).json() == user("hello")
    assert (await client.post("/_mock/reset")).json()["chat_requests"] == 0
    assert server.stats.requests == 0 and server.last_request is None
    refused = await client.post("/_mock/config", json={"fail_rate": 3})
    assert refused.status_code == 400 and "fail_rate" in refused.json()["error"]["message"]
    await configure(client, fail_rate=1.0, fail_status=503)
    assert (await client.get("/_mock/config")).json()["fail_status"] == 503
    assert (await chat(client)).status_code == 503
    server.settings.fail_rate = 0.0  # the handle's settings are live too
    assert (await chat(client)).status_code == 200


async def test_keep_alive_and_max_in_flight(client: httpx.AsyncClient, server: MockServer) -> None:
    for _ in range(50):
        assert (await chat(client)).status_code == 200
    assert server.stats.connections == 1
    server.settings.latency_ms = 300  # long enough to overlap on a loaded machine
    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(chat, client)
    assert server.stats.max_in_flight == 5 and server.stats.in_flight == 0


async def test_latency_and_jitter(client: httpx.AsyncClient) -> None:
    await configure(client, latency_ms=60, jitter_ms=20)
    start = trio.current_time()
    await chat(client)
    assert trio.current_time() - start >= 0.035  # latency less the jitter, at the least


async def test_fail_with_retry_after(client: httpx.AsyncClient) -> None:
    await configure(client, fault="fail", fail_status=429, retry_after_s=2)
    response = await chat(client)
    assert response.status_code == 429 and response.headers["retry-after"] == "2"
    assert response.json() == {"error": {"message": "mock failure", "type": "server_error"}}
    await configure(client, retry_after_http_date=True, retry_after_s=30)
    when = parsedate_to_datetime((await chat(client)).headers["retry-after"]).timestamp()
    assert 20 < when - time.time() <= 31
    await configure(client, retry_after_s=None, fail_status=500)
    assert "retry-after" not in (await chat(client)).headers


async def test_fail_first_n_then_succeed(client: httpx.AsyncClient, server: MockServer) -> None:
    await configure(client, fail_first_n=2)
    statuses = [(await chat(client)).status_code for _ in range(4)]
    assert statuses == [500, 500, 200, 200]
    assert server.stats.faults == {"fail": 2} and server.stats.ok == 2


async def test_fail_rate_is_seeded(client: httpx.AsyncClient) -> None:
    async def run() -> list[int]:
        await client.post("/_mock/reset")
        return [(await chat(client)).status_code for _ in range(40)]

    await configure(client, fail_rate=0.5, seed=3)
    first = await run()
    assert first == await run()
    assert 5 < first.count(500) < 35
    await configure(client, seed=4)
    assert first != await run()


async def test_hang_until_the_client_gives_up(client: httpx.AsyncClient, server: MockServer) -> None:
    await configure(client, hang_rate=1.0)
    with pytest.raises(httpx.ReadTimeout):
        await client.post("/chat/completions", json=user("x"), timeout=0.2)
    assert server.stats.faults == {"hang": 1}
    server.settings.hang_rate = 0.0
    assert (await chat(client)).status_code == 200


async def test_malformed_body(client: httpx.AsyncClient) -> None:
    await configure(client, malformed_rate=1.0)
    response = await chat(client)
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        response.json()


async def test_reset_closes_mid_body(client: httpx.AsyncClient) -> None:
    await configure(client, reset_rate=1.0)
    with pytest.raises(httpx.RemoteProtocolError):
        await chat(client)


async def test_stall_sends_half_then_waits(client: httpx.AsyncClient) -> None:
    await configure(client, fault="stall")
    with pytest.raises(httpx.ReadTimeout):
        await client.post("/chat/completions", json=user("x"), timeout=0.2)


async def test_oversized_body(client: httpx.AsyncClient) -> None:
    await configure(client, oversized_rate=1.0)
    response = await chat(client)
    assert len(response.content) > 8 * 1024 * 1024
    assert response.json()["object"] == "chat.completion"


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        ("missing_choices", lambda body: "choices" not in body and "usage" in body),
        ("empty_choices", lambda body: body["choices"] == []),
        (
            "content_null",
            lambda body: body["choices"][0]["message"] == {"role": "assistant", "content": None},
        ),
        ("no_usage", lambda body: "usage" not in body and body["choices"]),
    ],
)
async def test_body_shape_faults(client: httpx.AsyncClient, fault: str, check: Any) -> None:
    await configure(client, fault=fault)
    response = await chat(client)
    assert response.status_code == 200 and check(response.json())


async def test_html_fault(client: httpx.AsyncClient) -> None:
    await configure(client, fault="html")
    response = await chat(client)
    assert response.headers["content-type"] == "text/html" and response.text.startswith("<html>")


async def test_streaming(client: httpx.AsyncClient) -> None:
    response = await chat(client, user("Reply with exactly OK.", stream=True))
    assert response.headers["content-type"] == "text/event-stream"
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}  # role only
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "OK"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in c for c in chunks)  # only asked for with stream_options.include_usage


async def test_fixed_reply(client: httpx.AsyncClient) -> None:
    await configure(client, fixed_reply="always this")
    body = (await chat(client, user("Reply with exactly OK."))).json()
    assert body["choices"][0]["message"]["content"] == "always this"


async def test_chunked_request_goes_through_h11(client: httpx.AsyncClient) -> None:
    async def parts() -> AsyncIterator[bytes]:
        yield b'{"messages":[{"role":"user",'
        yield b'"content":"Reply with exactly CHUNKED."}]}'

    response = await client.post("/chat/completions", content=parts())
    assert response.json()["choices"][0]["message"]["content"] == "CHUNKED"
    assert (await chat(client)).status_code == 200  # the connection stays usable


async def raw_exchange(server: MockServer, data: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    await stream.send_all(data)
    received = b""
    with trio.move_on_after(2):
        while chunk := await stream.receive_some():
            received += chunk
    await stream.aclose()
    return received


async def test_pipelining_and_connection_close(server: MockServer) -> None:
    body = json.dumps(user("Reply with exactly P.")).encode()
    one = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % len(body)
    data = one + b"\r\n" + body + one + b"Connection: close\r\n\r\n" + body
    received = await raw_exchange(server, data)
    assert received.count(b"HTTP/1.1 200 OK") == 2
    assert received.count(b'"content":"P"') == 2 and b"connection: close" in received


async def test_http10_and_garbage_requests(server: MockServer) -> None:
    received = await raw_exchange(server, b"GET /v1/models HTTP/1.0\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 200") and b"mock-model" in received
    assert (await raw_exchange(server, b"NOT HTTP AT ALL\r\n\r\n")).startswith(b"HTTP/1.1 400")


async def test_open_mock_server_context() -> None:
    async with open_mock_server(MockSettings(model="ctx-model")) as mock:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", mock.url)
        async with httpx.AsyncClient() as http:
            body = (await http.post(mock.chat_url, json={"messages": []})).json()
    assert body["model"] == "ctx-model" and body["choices"][0]["message"]["content"] == ""


# -- as a process -----------------------------------------------------------------


@pytest.fixture
def mock_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    argv = [sys.executable, "-m", "evalhydra.services.mock", "--port", "0", "--fail-first-n", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.fullmatch(r"evalhydra mock listening on (http://127\.0\.0\.1:\d+/v1)\n", line)
        assert match, line
        yield proc, match.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=5)


async def test_cli_process_and_sync_openai_client(
    mock_process: tuple[subprocess.Popen[str], str],
) -> None:
    proc, url = mock_process

    def ask() -> tuple[int, Any]:
        # Closed when done: the exception's traceback puts the client in a reference cycle, so
        # left open its pooled socket waited for a collection, inside whatever test ran then.
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as sync:
            with pytest.raises(openai.InternalServerError) as failed:  # --fail-first-n 1
                sync.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "x"}])
            result = sync.chat.completions.create(
                model="gpt-x",
                messages=[{"role": "user", "content": "Search the web for the weather in Melbourne."}],
                tools=[SEARCH_WEB],  # type: ignore[list-item]
            )
        return failed.value.status_code, result

    status, result = await trio.to_thread.run_sync(ask)
    assert status == 500
    assert result.model == "gpt-x" and result.usage is not None and result.usage.total_tokens > 0
    call = result.choices[0].message.tool_calls[0]
    assert call.function.name == "search_web"
    assert json.loads(call.function.arguments) == {"query": "weather melbourne"}
    proc.send_signal(signal.SIGTERM)
    assert await trio.to_thread.run_sync(proc.wait, 5) == 0


async def test_a_reply_bug_answers_500_and_the_server_lives_on(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(payload: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("boom")

    monkeypatch.setattr("evalhydra.services.mock.chat.reply_for", broken)
    response = await chat(client, user("unique prompt for the broken reply"))
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "mock internal error: RuntimeError: boom"
    monkeypatch.undo()
    odd_tool = {
        "type": "function",
        "function": {"name": "odd", "parameters": {"properties": {"a": {"type": {}}}}},
    }
    assert (await chat(client, user("call odd", tools=[odd_tool]))).status_code == 200
