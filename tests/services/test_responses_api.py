"""OpenAI's Responses API (issue 49, item 1): the mock serves ``/v1/responses`` as the ``openai``
SDK reads it (text, reasoning, a function call, a stream), and ``service.api=responses`` runs an
eval through it, whole or streamed, with usage, reasoning and tool calls stored as for chat.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import evalhydra
from evalhydra.services.openai.response import InvalidResponseError
from evalhydra.services.openai.stream import ResponsesStreamAssembler
from evalhydra.services.responses_api import chat_reply, responses_request
from tests.conftest import smoke_eval, write_registry
from tests.helpers import mock_call, numbered_registry

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def on_responses(url: str, registry: Path, tmp_path: Path, *extra: str) -> Any:
    """Run eval ``g.e`` of ``registry`` against the mock at ``url`` through the Responses API."""
    return evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                               "service.mock.enabled=false", f"service.base_url={url}",
                               "service.api=responses",
                               f"store.path={tmp_path / 's.db'}", *extra])


@pytest.fixture
def sdk(url: str) -> Iterator[openai.OpenAI]:
    """The openai SDK's client of the mock (closed after the test)."""
    with openai.OpenAI(base_url=url, api_key="sk-mock-not-a-key", max_retries=0) as found:
        yield found


def test_the_sdk_reads_a_text_reply_with_its_usage(url: str, sdk: openai.OpenAI) -> None:
    reply = sdk.responses.create(
        model="mock-model", input="Reply with exactly V7.", instructions="Be brief.", max_output_tokens=32
    )
    assert reply.output_text == "V7" and reply.status == "completed"
    assert reply.usage is not None and reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    sent = mock_call(url, "last")
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}  # instructions reached it


def test_the_sdk_reads_reasoning_and_a_function_call(url: str, sdk: openai.OpenAI) -> None:
    mock_call(url, "config", {"reasoning": "reasoning_content"})
    thought = sdk.responses.create(model="mock-model", input="Reply with exactly V1.")
    kinds = [item.type for item in thought.output]
    assert kinds == ["reasoning", "message"] and thought.output_text == "V1"
    assert thought.usage is not None and thought.usage.output_tokens_details.reasoning_tokens > 0
    mock_call(url, "config", {"reasoning": None})
    called = sdk.responses.create(
        model="mock-model", input="Use get_weather for Paris.", tools=[WEATHER]
    )  # type: ignore[list-item]
    (call,) = [item for item in called.output if item.type == "function_call"]
    assert call.name == "get_weather" and "city" in json.loads(call.arguments)


def test_the_sdk_reads_a_stream_of_typed_events(url: str, sdk: openai.OpenAI) -> None:
    events = list(
        sdk.responses.create(
            model="mock-model", input="Reply with exactly Vlonger-reply.", stream=True
        )
    )
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert text == "Vlonger-reply" and events[-1].response.output_text == "Vlonger-reply"


@pytest.mark.parametrize("stream", [False, True])
def test_an_eval_runs_through_the_responses_api(stream: bool, url: str, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 3)
    result = on_responses(url, registry, tmp_path, f"service.stream={str(stream).lower()}",
                          "+service.params.max_tokens=64")
    rows = list(result.rows())
    assert result.exit_code == 0 and [r["passed"] for r in rows] == [1, 1, 1]
    assert all(r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 for r in rows)
    assert all((r["ttft_ms"] is not None) == stream for r in rows)
    assert {r["finish_reason"] for r in rows} == {"stop"}  # how each reply ended, and its id
    ids = {r["response_id"] for r in rows}
    assert all(i.startswith("resp_") for i in ids) and len(ids) == 3
    sent = mock_call(url, "last")
    assert sent["max_tokens"] == 64  # max_output_tokens on the wire, read back by the mock


@pytest.mark.slow
def test_a_tool_eval_stores_the_function_call(url: str, tmp_path: Path) -> None:
    tools = [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters_json": json.dumps(WEATHER["parameters"]),
        }
    ]
    spec = smoke_eval(tools=tools, matcher={"kind": "tool_call"})
    expected = [{"name": "get_weather"}]
    line = (
        json.dumps({"id": "c1", "input": "Use get_weather for Paris.", "expected_tool_calls": expected})
        + "\n"
    )
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": spec}, data={"data/g/e/test.jsonl": line})
    result = on_responses(url, registry, tmp_path)
    (row,) = result.rows()
    assert row["passed"] == 1 and json.loads(row["tool_calls"])[0]["name"] == "get_weather"


def test_the_translations_keep_what_each_api_means() -> None:
    chat = {
        "model": "m",
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        "max_completion_tokens": 9,
        "reasoning_effort": "low",
        "stream": False,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": {"type": "object"}, "strict": True},
        },
        "tools": [{"type": "function", "function": WEATHER | {"type": None}}],
    }
    body = responses_request(chat)
    assert body["instructions"] == "S" and body["input"] == [{"role": "user", "content": "U"}]
    assert body["max_output_tokens"] == 9 and body["reasoning"] == {"effort": "low"}
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": True}
    }
    reply = {
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "model": "m",
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "T"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "A"}]},
        ],
        "usage": {
            "input_tokens": 5,
            "output_tokens": 9,
            "total_tokens": 14,
            "input_tokens_details": {"cached_tokens": 2},
            "output_tokens_details": {"reasoning_tokens": 4},
        },
    }
    chat_answer = chat_reply(reply)
    choice = chat_answer["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] == "A"
    assert choice["message"]["reasoning_content"] == "T"
    assert chat_answer["usage"]["prompt_tokens_details"] == {"cached_tokens": 2}
    assert chat_answer["usage"]["completion_tokens_details"] == {"reasoning_tokens": 4}


def test_batch_mode_sends_responses_lines(url: str, tmp_path: Path) -> None:
    """Batch mode with ``service.api=responses``: each line a ``/v1/responses`` body, the batch
    created for that endpoint, the answers read as the online ones."""
    registry = numbered_registry(tmp_path / "reg", 3)
    result = on_responses(url, registry, tmp_path, "service.batch.enabled=true",
                          "service.batch.poll_interval_s=0.05", "service.batch.keep_files=true")
    rows = list(result.rows())
    assert result.exit_code == 0 and [(r["passed"], r["batched"]) for r in rows] == [(1, 1)] * 3
    (batch,) = httpx.get(f"{url}/batches", params={"limit": 10}).json()["data"]
    assert batch["endpoint"] == "/v1/responses"
    lines = httpx.get(f"{url}/files/{batch['input_file_id']}/content").text.splitlines()
    assert {json.loads(line)["url"] for line in lines} == {"/v1/responses"}
    assert all("input" in json.loads(line)["body"] for line in lines)


def test_the_stream_reader_joins_typed_events_and_stops_at_a_failure() -> None:
    """The Responses API's events as a server sends them: text and reasoning deltas, a function
    call, the completion with its usage and stop; ``response.failed`` is the call's error."""
    ticks = iter(range(100))
    reader = ResponsesStreamAssembler("m", ("<think>", "</think>"), 0.0, lambda: float(next(ticks)))
    events = [
        {"type": "response.reasoning_summary_text.delta", "delta": "Thinking."},
        {"type": "response.output_text.delta", "delta": "Par"},
        {"type": "response.output_text.delta", "delta": "is"},
        {"type": "response.output_item.done", "output_index": 2,
         "item": {"type": "function_call", "name": "get_weather", "arguments": '{"city":"Paris"}'}},
        {"type": "response.completed", "response": {
            "object": "response", "model": "m-1", "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 4, "output_tokens": 6, "total_tokens": 10,
                      "output_tokens_details": {"reasoning_tokens": 2}}}},
    ]
    for event in events:
        reader.feed(event["type"], json.dumps(event))
    assert reader.done
    answer = reader.answer()
    assert (answer.output, answer.reasoning) == ("Paris", "Thinking.")
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("get_weather", '{"city":"Paris"}')]
    usage = answer.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens) == (4, 6, 2)
    failing = ResponsesStreamAssembler("m", None, 0.0, lambda: 0.0)
    failed = {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}}
    with pytest.raises(InvalidResponseError, match="boom"):
        failing.feed("response.failed", json.dumps(failed))
