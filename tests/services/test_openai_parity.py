"""Issue 3 item 11: the official ``openai`` package is the reference client.

* The mock's answers go through ``openai.OpenAI`` (the sync client, in a worker
  thread, since ``AsyncOpenAI`` is asyncio-only) and must parse as a real API's
  would; evalhydra's parser must read the very same bytes the same way.
* For the same call, the body (and the auth header) evalhydra puts on the wire
  must equal what the ``openai`` package sends: messages, tools, image parts,
  params. Both bodies are captured by the mock (``last_request``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import openai
import pytest
import trio

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import Attachment, Case, ChatRequest, ToolCall, ToolSpec
from evalhydra.services.mock import MockServer, MockSettings, serve
from evalhydra.services.openai import (
    OpenAICompatService,
    parse_chat_response,
    upstream_error_message,
)
from evalhydra.services.render import build_chat_request

T = TypeVar("T")
KEY = "sk-parity-test"
SEARCH_PARAMS = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
SEARCH = ToolSpec("search_web", "Search the web for current information.", SEARCH_PARAMS)
SEARCH_TOOL: Any = {"type": "function", "function": {
    "name": "search_web", "description": "Search the web for current information.",
    "parameters": SEARCH_PARAMS}}
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


@pytest.fixture
async def server(nursery: trio.Nursery) -> MockServer:
    started: MockServer = await nursery.start(serve, MockSettings())
    return started


@pytest.fixture
def client(server: MockServer) -> Iterator[openai.OpenAI]:
    sync = openai.OpenAI(base_url=server.url, api_key=KEY, max_retries=0, timeout=10)
    try:
        yield sync
    finally:
        sync.close()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


async def in_thread(fn: Callable[[], T]) -> T:
    """Run a blocking openai call while the mock keeps serving in this trio loop."""
    return await trio.to_thread.run_sync(fn)


async def evalhydra_call(server: MockServer, root: Path, request: ChatRequest, **cfg: Any) -> Any:
    cfg.setdefault("rate_limit_timeout_s", 0)  # a 429 fails the call, as the openai client's does
    svc = OpenAICompatService(ServiceConfig(name="svc", base_url=server.url, **cfg), registry_root=root)
    try:
        return await svc.complete(request)
    finally:
        await svc.aclose()


# --------------------------------------------------------------------------- responses


async def test_plain_content_parses_the_same_in_both_clients(
    client: openai.OpenAI, server: MockServer
) -> None:
    raw = await in_thread(lambda: client.chat.completions.with_raw_response.create(
        model="gpt-x", messages=[{"role": "user", "content": "Reply with exactly OK."}]))
    completion = raw.parse()
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    choice = completion.choices[0]
    assert (choice.index, choice.finish_reason, choice.message.role) == (0, "stop", "assistant")
    assert choice.message.content == "OK" and choice.message.tool_calls is None
    usage = completion.usage
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 0
    ours = parse_chat_response(raw.http_response.content, "requested")
    assert (ours.output, ours.model, ours.tool_calls) == ("OK", completion.model, ())
    assert (ours.usage.prompt_tokens, ours.usage.completion_tokens, ours.usage.cached_tokens) == (
        usage.prompt_tokens, usage.completion_tokens, 0)


async def test_tool_calls_with_null_content_parse_the_same(client: openai.OpenAI) -> None:
    raw = await in_thread(lambda: client.chat.completions.with_raw_response.create(
        model="gpt-x", tools=[SEARCH_TOOL],
        messages=[{"role": "user", "content": "Search the web for the weather in Melbourne."}]))
    choice = raw.parse().choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "search_web"
    assert json.loads(call.function.arguments) == {"query": "weather melbourne"}  # a JSON *string*
    ours = parse_chat_response(raw.http_response.content, "requested")
    assert ours.output == "" and ours.tool_calls == (ToolCall(call.function.name, call.function.arguments,
                                                              call.id),)


@pytest.mark.parametrize("fault", ["content_null", "no_usage"])
async def test_edge_shapes_parse_the_same(fault: str, client: openai.OpenAI, server: MockServer) -> None:
    server.settings.fault = fault
    raw = await in_thread(lambda: client.chat.completions.with_raw_response.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi"}]))
    completion = raw.parse()
    ours = parse_chat_response(raw.http_response.content, "requested")
    assert ours.output == (completion.choices[0].message.content or "")
    assert ours.model == completion.model
    if completion.usage is None:
        assert (ours.usage.prompt_tokens, ours.usage.completion_tokens) == (0, 0)


async def test_streamed_answers_parse_in_the_openai_client(client: openai.OpenAI) -> None:
    def stream(**extra: Any) -> tuple[str, list[Any], Any]:
        text, calls, usage = "", list[Any](), None
        for chunk in client.chat.completions.create(model="gpt-x", stream=True,
                                                    stream_options={"include_usage": True}, **extra):
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                calls += choice.delta.tool_calls or []
        return text, calls, usage

    text, calls, usage = await in_thread(lambda: stream(
        messages=[{"role": "user", "content": "Reply with exactly OK."}]))
    assert (text, calls) == ("OK", []) and usage is not None and usage.total_tokens > 0
    text, calls, _ = await in_thread(lambda: stream(tools=[SEARCH_TOOL], messages=[
        {"role": "user", "content": "Search the web for the weather in Melbourne."}]))
    # a tool call's first delta names it; its arguments arrive in pieces under its index
    assert text == "" and [c.function.name for c in calls if c.function.name] == ["search_web"]
    assert len(calls) > 2 and {c.index for c in calls} == {0}
    arguments = "".join(c.function.arguments or "" for c in calls)
    assert json.loads(arguments) == {"query": "weather melbourne"}


@pytest.mark.parametrize(("status", "error"), [
    (429, openai.RateLimitError), (500, openai.InternalServerError), (503, openai.InternalServerError),
    (400, openai.BadRequestError)])
async def test_error_statuses_map_like_the_openai_client(
    status: int, error: type[openai.APIStatusError], client: openai.OpenAI, server: MockServer, tmp_path: Path
) -> None:
    server.settings.update({"fault": "fail", "fail_status": status, "retry_after_s": 1})

    def fail() -> openai.APIStatusError:
        with pytest.raises(error) as caught:
            client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "x"}])
        return caught.value

    theirs = await in_thread(fail)
    assert theirs.status_code == status and theirs.response.headers["retry-after"] == "1"
    assert isinstance(theirs.body, dict)
    assert upstream_error_message(theirs.response.content) == theirs.body["message"] == "mock failure"
    ours = await evalhydra_call(server, tmp_path, ChatRequest("x"))
    assert (ours.status_code, ours.error_message) == (status, theirs.body["message"])


# --------------------------------------------------------------------------- requests


async def both_bodies(client: openai.OpenAI, server: MockServer, root: Path, request: ChatRequest,
                      cfg: dict[str, Any], **theirs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(body the openai package sent, body evalhydra sent) for the same call, as the mock saw them.

    With ``api_key_env`` set to the same key, the auth header must match too.
    """
    await in_thread(lambda: client.chat.completions.create(**theirs))
    sent_by_openai, openai_headers = server.last_request, server.last_headers
    done = await evalhydra_call(server, root, request, **cfg)
    assert done.ok, done.error_message
    sent_by_us, our_headers = server.last_request, server.last_headers
    assert sent_by_openai is not None and sent_by_us is not None
    assert openai_headers is not None and our_headers is not None
    assert our_headers["content-type"] == openai_headers["content-type"] == "application/json"
    if "api_key_env" in cfg:
        assert our_headers["authorization"] == openai_headers["authorization"] == f"Bearer {KEY}"
    else:
        assert "authorization" not in our_headers
    return sent_by_openai, sent_by_us


def same_call(theirs: dict[str, Any], ours: dict[str, Any]) -> None:
    """Identical bodies, except that evalhydra always says ``stream: false`` (the default)."""
    assert ours.pop("stream") is False and theirs.pop("stream", False) is False
    assert ours == theirs


async def test_plain_request_with_system_prompt_tools_and_params_matches(
    client: openai.OpenAI, server: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EH_PARITY_KEY", KEY)
    cfg = {"default_model": "gpt-x", "system_prompt": "Follow the eval instructions exactly.",
           "api_key_env": "EH_PARITY_KEY", "provider": "product",
           "params": {"temperature": 0, "max_tokens": 64, "seed": 7, "top_p": 0.5,
                      "response_format": {"type": "text"}}}
    request = ChatRequest("Search the web for the weather in Melbourne.", tools=(SEARCH,))
    theirs, ours = await both_bodies(
        client, server, tmp_path, request, cfg, model="gpt-x",
        messages=[{"role": "system", "content": "Follow the eval instructions exactly."},
                  {"role": "user", "content": "Search the web for the weather in Melbourne."}],
        tools=[SEARCH_TOOL], temperature=0, max_tokens=64, seed=7, top_p=0.5,
        response_format={"type": "text"}, extra_body={"provider": "product"})
    same_call(theirs, ours)


async def test_attachment_parts_match_the_openai_content_part_shapes(
    client: openai.OpenAI, server: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A case with a text file and two images, rendered by evalhydra, against the parts written by hand
    the way the openai package documents them (``ChatCompletionContent*PartParam``)."""
    monkeypatch.setenv("EH_PARITY_KEY", KEY)
    (tmp_path / "assets").mkdir()
    notes = "# 1.2\n- retry configuration\n- bounded parallel execution\n"
    (tmp_path / "assets" / "notes.md").write_text(notes)
    (tmp_path / "assets" / "a.png").write_bytes(PNG)
    (tmp_path / "assets" / "b.png").write_bytes(PNG[::-1])
    case = Case(id="c", input="Describe the images and summarise the notes.", attachments=(
        Attachment("image", "assets/a.png", "image/png", "first"),
        Attachment("file", "assets/notes.md", "text/markdown", "release notes"),
        Attachment("image", "assets/b.png", "image/png")))
    request = build_chat_request(case, (), tmp_path)
    text = ("Describe the images and summarise the notes."
            f"\n\n[Attachment: release notes (text/markdown)]\n```text\n{notes}\n```")
    parts: Any = [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": data_url(PNG)}},
        {"type": "image_url", "image_url": {"url": data_url(PNG[::-1])}},
    ]
    theirs, ours = await both_bodies(client, server, tmp_path, request,
                                     {"default_model": "gpt-x", "api_key_env": "EH_PARITY_KEY"},
                                     model="gpt-x", messages=[{"role": "user", "content": parts}])
    same_call(theirs, ours)


async def test_model_override_and_no_key_match(
    client: openai.OpenAI, server: MockServer, tmp_path: Path
) -> None:
    request = ChatRequest("hello", model="gpt-override")
    theirs, ours = await both_bodies(client, server, tmp_path, request, {"default_model": "gpt-x"},
                                     model="gpt-override", messages=[{"role": "user", "content": "hello"}])
    same_call(theirs, ours)
