"""A streamed chat completion is assembled from server-sent events, or refused (issue 35, item 3).

The streams are byte strings fed through :func:`read_stream` in pieces cut at every offset, so
events, lines and UTF-8 sequences arrive split as they do from a network; timing runs on trio's
MockClock.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from evalhydra.services.openai.response import InvalidResponseError
from evalhydra.services.openai.stream import StreamAssembler, is_event_stream, read_stream

TAGS = ("<think>", "</think>")


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "c1", "object": "chat.completion.chunk", "model": "served-model", "choices": choices,
            **extra}


def sse(*chunks: dict[str, Any] | str) -> bytes:
    return b"".join(b"data: " + (c if isinstance(c, str) else json.dumps(c, ensure_ascii=False)).encode()
                    + b"\n\n" for c in chunks)


USAGE = {"prompt_tokens": 7, "completion_tokens": 12, "completion_tokens_details": {"reasoning_tokens": 5}}
WHOLE = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning_content": "Zürich is "}), chunk({"reasoning_content": "in Switzerland."}),
    chunk({"content": "Grüezi "}), chunk({"content": "— 日本語 ✓"}),
    chunk({"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                           "function": {"name": "lookup", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "t2", "type": "function",
                           "function": {"name": "other", "arguments": "{}"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Zürich"}'}}]}),
    chunk({}, "tool_calls"), chunk(None, usage=USAGE), "[DONE]")


class Pieces(httpx.AsyncByteStream):
    """A body that arrives in the given pieces, ``gap`` seconds apart."""

    def __init__(self, pieces: list[bytes], gap: float = 0.0) -> None:
        self.pieces = pieces
        self.gap = gap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            if self.gap:
                await trio.sleep(self.gap)
            yield piece


def response(pieces: list[bytes], gap: float = 0.0,
             content_type: str = "text/event-stream") -> httpx.Response:
    return httpx.Response(200, headers={"content-type": content_type}, stream=Pieces(pieces, gap))


async def assemble(pieces: list[bytes], tags: tuple[str, str] | None = TAGS, gap: float = 0.0,
                   cap: int = 1 << 20) -> Any:
    assembler = StreamAssembler("asked-model", tags, trio.current_time(), trio.current_time)
    return await read_stream(response(pieces, gap), assembler, cap)


async def test_every_split_of_the_bytes_gives_the_same_answer() -> None:
    expected = await assemble([WHOLE])
    assert expected.output == "Grüezi — 日本語 ✓"
    assert expected.reasoning == "Zürich is in Switzerland."
    assert [(c.name, c.arguments) for c in expected.tool_calls] == [("lookup", '{"city": "Zürich"}'),
                                                                    ("other", "{}")]
    assert (expected.model, expected.usage.prompt_tokens, expected.usage.completion_tokens) == (
        "served-model", 7, 12)
    assert expected.usage.reasoning_tokens == 5 and expected.usage.reported
    assert (expected.finish_reason, expected.response_id) == ("tool_calls", "c1")
    for cut in range(1, len(WHOLE)):  # every offset: mid-line, mid-event, mid-character
        got = await assemble([WHOLE[:cut], WHOLE[cut:]])
        assert (got.output, got.reasoning, got.tool_calls) == (expected.output, expected.reasoning,
                                                               expected.tool_calls), cut
    one_byte_at_a_time = await assemble([WHOLE[i:i + 1] for i in range(len(WHOLE))])
    assert one_byte_at_a_time.output == expected.output


async def test_inline_thinking_is_taken_out_of_a_streamed_answer() -> None:
    body = sse(chunk({"content": "<thi"}), chunk({"content": "nk>I think"}), chunk({"content": "</th"}),
               chunk({"content": "ink>\n\nParis"}), chunk({}, "stop"), "[DONE]")
    answer = await assemble([body])
    assert (answer.output, answer.reasoning) == ("Paris", "I think")
    kept = await assemble([body], tags=None)  # service.reasoning.parse=false
    assert kept.output == "<think>I think</think>\n\nParis" and kept.reasoning is None


@pytest.mark.parametrize(("body", "reason"), [
    (sse(chunk({"content": "Par"})), "StreamCut"),  # no [DONE]: the connection ended mid-answer
    (sse(chunk({"content": "Par"}), "[DONE]"), "StreamUnfinished"),  # llama-cpp-python's early [DONE]
    (sse(chunk({"content": "Par"}), {"error": {"message": "overloaded"}}), "StreamError: overloaded"),
    (b"event: error\ndata: {\"message\": \"quota\"}\n\n", "StreamError"),
    (sse(chunk({"content": "Par"}), "{not json"), "InvalidUpstreamJson"),
    (b'data: {"choices": [{"index": 0, "delta": {"content": "\xff"}}]}\n\n', "InvalidUpstreamJson"),
    (sse(chunk({"content": 5}), "[DONE]"), "MalformedSuccessPayload"),
    (sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}, "tool_calls"), "[DONE]"),
     "MalformedSuccessPayload"),  # a tool call never named
])
async def test_a_stream_that_is_not_a_whole_answer_is_refused(body: bytes, reason: str) -> None:
    with pytest.raises(InvalidResponseError) as caught:
        await assemble([body])
    assert str(caught.value.args[0]).startswith(reason)


async def test_a_stream_is_capped_like_a_whole_reply() -> None:
    body = sse(chunk({"content": "x" * 5000}), chunk({}, "stop"), "[DONE]")
    assert (await assemble([body], cap=len(body))).output == "x" * 5000
    with pytest.raises(InvalidResponseError, match="ResponseTooLarge"):
        await assemble([body[:100], body[100:]], cap=1000)


async def test_no_usage_chunk_leaves_the_tokens_unknown() -> None:
    answer = await assemble([sse(chunk({"content": "OK"}, "stop"), "[DONE]")])
    assert answer.output == "OK" and not answer.usage.reported
    assert answer.timing.output_tps is None


async def test_time_to_first_token_and_to_the_answer_on_the_run_clock(
        autojump_clock: trio.testing.MockClock) -> None:
    """Events 100 ms apart: the role-only chunk does not count, the thinking does, the answer
    starts after the closing tag."""
    events = [sse(chunk({"role": "assistant", "content": ""})),
              sse(chunk({"content": "<think>hm"})), sse(chunk({"content": " yes</think>"})),
              sse(chunk({"content": "\n"})), sse(chunk({"content": "Yes"})), sse(chunk({"content": "!"})),
              sse(chunk({}, "stop"), chunk(None, usage={"prompt_tokens": 1, "completion_tokens": 12}),
                  "[DONE]")]
    answer = await assemble(events, gap=0.1)
    timing = answer.timing
    assert answer.output == "Yes!"
    assert timing.ttft_ms == pytest.approx(200.0)  # the second event: the first with text
    assert timing.first_answer_ms == pytest.approx(500.0)  # "Yes", after the thinking and a newline
    assert timing.output_tps == pytest.approx(12 / 0.4)  # from the first delta (0.2 s) to the last (0.6 s)


async def test_separate_reasoning_deltas_time_the_answer_from_its_first_content(
        autojump_clock: trio.testing.MockClock) -> None:
    events = [sse(chunk({"reasoning": "a"})), sse(chunk({"reasoning": "b"})), sse(chunk({"content": "A"})),
              sse(chunk({}, "stop"), "[DONE]")]
    timing = (await assemble(events, gap=0.05)).timing
    assert (timing.ttft_ms, timing.first_answer_ms) == (pytest.approx(50.0), pytest.approx(150.0))


def test_only_an_event_stream_is_read_as_one() -> None:
    assert is_event_stream(response([], content_type="text/event-stream; charset=utf-8"))
    assert not is_event_stream(response([], content_type="application/json"))


async def test_the_reply_id_is_the_first_chunk_that_names_one_and_kept_short() -> None:
    long_id = "x" * 10_000
    body = sse({**chunk({"content": "OK"}), "id": long_id}, {**chunk({}, "length"), "id": "other"}, "[DONE]")
    answer = await assemble([body])
    assert answer.finish_reason == "length" and answer.response_id == "x" * 200
    nameless = sse({k: v for k, v in chunk({"content": "OK"}, "stop").items() if k != "id"}, "[DONE]")
    assert (await assemble([nameless])).response_id is None
