"""Issue 51, item 5: tool calls as real servers send them, each a mock mode, read right over real
HTTP: ids missing or reused, ``index`` missing or reused, names on every delta, a bare last delta,
``arguments: ""``, text beside the calls, ``finish_reason: stop`` with calls, a character's
surrogate halves split over two argument deltas; streamed and whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import ChatRequest, ToolSpec, arguments_or_empty
from evalhydra.services.mock.streaming import TOOL_WIRES
from evalhydra.services.openai.service import OpenAICompatService
from tests.helpers import mock_call, mock_process

SCRIPT = ('Call lookup_order with {"id": 7, "note": "fast \U0001F680"}. Call refund with {"id": 7}. '
          "Do it in parallel.")
ORDER = {"type": "object", "properties": {"id": {"type": "integer"}}}
TOOLS = (ToolSpec("lookup_order", "Find an order.", ORDER), ToolSpec("refund", "Refund an order.", ORDER))
STREAM_ONLY = {"no_index", "reused_index", "names_repeated", "last_bare", "split_surrogate"}


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with mock_process() as url:
        yield url


SHAPES = [(wire, stream) for wire in (None, *TOOL_WIRES) for stream in (False, True)
          if stream or wire not in STREAM_ONLY]


@pytest.mark.parametrize(("wire", "stream"), SHAPES)
async def test_each_wire_shape_gives_the_calls_the_model_made(mock_url: str, tmp_path: Path, wire: str | None,
                                                              stream: bool) -> None:
    mock_call(mock_url, "config", {"tool_wire": wire})
    service = OpenAICompatService(ServiceConfig(name="m", base_url=mock_url, stream=stream),
                                  registry_root=tmp_path)
    try:
        answer = await service.complete(ChatRequest(SCRIPT, model="mock-model", tools=TOOLS))
    finally:
        await service.aclose()
    assert answer.error_kind is None, answer.error_message
    assert [c.name for c in answer.tool_calls] == ["lookup_order", "refund"]
    arguments = [json.loads(arguments_or_empty(c.arguments)) for c in answer.tool_calls]
    if wire == "empty_arguments":
        assert arguments == [{}, {}]
        assert [c.arguments for c in answer.tool_calls] == ["", ""]  # kept as sent
    elif wire == "split_surrogate":
        assert arguments[0] == {"id": 7, "note": "fast \U0001F680"} and arguments[1]["mood"] == "\U0001F600"
    else:
        assert arguments == [{"id": 7, "note": "fast \U0001F680"}, {"id": 7}]
    ids = [c.id for c in answer.tool_calls]
    expected_ids = {"no_ids": [None, None], "same_ids": ["call_0", "call_0"]}.get(wire or "",
                                                                                 ["call_0", "call_1"])
    assert ids == expected_ids  # the provider's ids are kept as sent (the loop makes its own)
    assert answer.output == ("Let me look that up." if wire == "content_and_calls" else "")
