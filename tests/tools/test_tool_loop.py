"""Issue 51, items 2–4: the loop over the project's mock on 127.0.0.1, as a chat service runs it.
The mock plays a model with a script ("Call NAME with {JSON}.", one call a turn, or all at once
"in parallel") and answers from the last tool result; the tools are the test package's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalhydra.config.schema import PricingConfig, ServiceConfig
from evalhydra.core.values import ChatRequest, ToolSpec
from evalhydra.execute.toolbox import Toolbox
from evalhydra.execute.toolloop import LoopOutcome, run_loop
from evalhydra.plan.tools import LoopPlan, ToolImpl
from evalhydra.services.openai.service import OpenAICompatService
from tests.helpers import mock_call, mock_process
from tests.tools import tool_pkg

ROOT = Path(__file__).resolve().parents[2]
INT = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
       "required": ["a", "b"]}
TOOLS = (ToolSpec("add", "Add.", INT), ToolSpec("submit", "Hand in the answer.", {"type": "object"}),
         ToolSpec("stamp", "Note the time.", {"type": "object", "properties": {"label": {"type": "string"}}}))
IMPLS = (ToolImpl("add", "tests.tools.tool_pkg:add"), ToolImpl("submit", replies="handed in"),
         ToolImpl("stamp", "tests.tools.tool_pkg:stamp", parallel=True))


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with mock_process() as url:
        yield url


@pytest.fixture(autouse=True)
def plain_mock(mock_url: str) -> None:
    mock_call(mock_url, "config", {"tool_wire": None, "fault": None, "latency_ms": 0, "fail_first_n": 0})


async def loop_of(url: str, text: str, tmp_path: Path, *, impls: tuple[ToolImpl, ...] = IMPLS,
                  **limits: Any) -> LoopOutcome:
    config = ServiceConfig(name="m", base_url=url, pricing=PricingConfig(input_per_mtok=1000.0))
    service = OpenAICompatService(config, registry_root=tmp_path)
    plan = LoopPlan(tools=impls, **limits)
    try:
        return await run_loop(service, ChatRequest(text, model="mock-model", tools=TOOLS), plan,
                              Toolbox(plan, TOOLS, ROOT))
    finally:
        await service.aclose()


async def test_the_model_calls_reads_results_and_answers(mock_url: str, tmp_path: Path) -> None:
    outcome = await loop_of(mock_url, 'Call add with {"a": 1, "b": 2}. Call add with {"a": 3, "b": 4}. '
                                      "Then reply with exactly seven.", tmp_path)
    assert outcome.stop_reason == "model_stopped" and outcome.completion.output == "seven"
    assert [(r["name"], r["parsed"], r["result"]) for r in outcome.call_rows] == [
        ("add", {"a": 1, "b": 2}, "3"), ("add", {"a": 3, "b": 4}, "7")]
    assert [r["turn"] for r in outcome.turn_rows] == [1, 2, 3]
    roles = [m["role"] for m in outcome.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert outcome.messages[2]["tool_call_id"] == outcome.messages[1]["tool_calls"][0]["id"] == "call_1_0"
    completion = outcome.completion
    assert completion.usage.prompt_tokens == sum(r["prompt_tokens"] for r in outcome.turn_rows) > 0
    assert completion.cost_usd > 0
    assert completion.cost_usd == pytest.approx(sum(r["cost_usd"] for r in outcome.turn_rows))
    assert [c.name for c in completion.tool_calls] == ["add", "add"]


async def test_each_limit_ends_the_loop_as_an_outcome(mock_url: str, tmp_path: Path) -> None:
    script = 'Call add with {"a": 1, "b": 1}. Call add with {"a": 2, "b": 2}. Call add with {"a": 3, "b": 3}.'
    turns = await loop_of(mock_url, script, tmp_path, max_turns=2)
    assert turns.stop_reason == "turn_limit" and len(turns.turn_rows) == 2
    assert turns.completion.error_kind is None  # a limit is an outcome, scored as it stands
    tokens = await loop_of(mock_url, script, tmp_path, max_tokens=10)
    assert tokens.stop_reason == "token_limit" and len(tokens.turn_rows) == 1
    cost = await loop_of(mock_url, script, tmp_path, max_cost_usd=1e-9)
    assert cost.stop_reason == "cost_limit" and len(cost.turn_rows) == 1
    mock_call(mock_url, "config", {"latency_ms": 400})
    timed = await loop_of(mock_url, script, tmp_path, cell_timeout_s=0.1)
    assert timed.stop_reason == "time_limit" and timed.turn_rows == [] and timed.completion.error_kind is None


async def test_the_submit_tool_ends_the_loop_with_its_arguments(mock_url: str, tmp_path: Path) -> None:
    outcome = await loop_of(mock_url, 'Call add with {"a": 1, "b": 1}. Call submit with {"answer": "2"}.',
                            tmp_path, submit_tool="submit")
    assert outcome.stop_reason == "submit" and json.loads(outcome.completion.output) == {"answer": "2"}
    assert [r["name"] for r in outcome.call_rows] == ["add"]  # the submit call is the answer, not a tool run


async def test_a_tool_error_goes_back_to_the_model(mock_url: str, tmp_path: Path) -> None:
    outcome = await loop_of(mock_url, 'Call add with {"a": "one", "b": 2}. Call nope with {}.', tmp_path)
    assert [r["error_kind"] for r in outcome.call_rows] == ["schema_mismatch", "unknown_tool"]
    assert outcome.messages[2]["content"].startswith("error: the arguments do not fit")
    assert outcome.stop_reason == "model_stopped" and outcome.completion.output.startswith("error: no tool")


async def test_parallel_tools_run_together_and_results_keep_the_models_order(mock_url: str,
                                                                             tmp_path: Path) -> None:
    tool_pkg.STAMPS.clear()
    outcome = await loop_of(mock_url, 'Call stamp with {"label": "a"}. Call stamp with {"label": "b"}. '
                                      'Call add with {"a": 1, "b": 1}. Do it in parallel.', tmp_path)
    order = [label for label, _ in tool_pkg.STAMPS]
    assert set(order[:2]) == {"a", "b"} and set(order[2:]) == {"a done", "b done"}  # both began, then ended
    assert [m["content"] for m in outcome.messages if m["role"] == "tool"] == ["a", "b", "2"]
    assert [m["tool_call_id"] for m in outcome.messages if m["role"] == "tool"] == ["call_1_0", "call_1_1",
                                                                                    "call_1_2"]
    tool_pkg.STAMPS.clear()  # a call of a serial tool between two parallel ones is a barrier
    await loop_of(mock_url, 'Call stamp with {"label": "a"}. Call add with {"a": 1, "b": 1}. '
                            'Call stamp with {"label": "b"}. In parallel.', tmp_path)
    assert [label for label, _ in tool_pkg.STAMPS] == ["a", "a done", "b", "b done"]
    serial = (ToolImpl("add", "tests.tools.tool_pkg:add"), ToolImpl("stamp", "tests.tools.tool_pkg:stamp"))
    tool_pkg.STAMPS.clear()
    await loop_of(mock_url, 'Call stamp with {"label": "a"}. Call stamp with {"label": "b"}. In parallel.',
                  tmp_path, impls=serial)
    assert [label for label, _ in tool_pkg.STAMPS] == ["a", "a done", "b", "b done"]


async def test_a_request_that_fails_is_the_cells_infrastructure_error(mock_url: str, tmp_path: Path) -> None:
    mock_call(mock_url, "config", {"fault": "fail", "fail_status": 500})
    outcome = await loop_of(mock_url, 'Call add with {"a": 1, "b": 1}.', tmp_path)
    assert outcome.stop_reason is None and outcome.completion.error_kind is not None
    assert len(outcome.turn_rows) == 1 and outcome.turn_rows[0]["error_kind"]


async def test_tool_choice_and_parallel_tool_calls_are_sent_as_configured(mock_url: str,
                                                                          tmp_path: Path) -> None:
    none = await loop_of(mock_url, 'Call add with {"a": 1, "b": 1}. Reply with exactly no tools.', tmp_path,
                         tool_choice="none", parallel_tool_calls=False, strict=True)
    assert none.call_rows == [] and none.completion.output == "no tools"
    sent = mock_call(mock_url, "last")  # the last request body the mock received
    assert sent.get("tool_choice") == "none" and sent.get("parallel_tool_calls") is False
    assert [t["function"]["strict"] for t in sent["tools"]] == [True, True, True]
    named = await loop_of(mock_url, "Reply with exactly hi.", tmp_path, tool_choice="add")
    assert mock_call(mock_url, "last")["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert named.call_rows[0]["name"] == "add"  # a named choice forces the call
