"""A tool loop: send the conversation, run the calls the model asks for, send their results,
until the model answers without a call (or calls the submit tool) or a limit ends it.

Each request is one :meth:`Service.complete` call, so it goes through the service's retries,
adaptive limit, cache (keyed on the whole conversation and tools) and cost accounting, and takes
a slot of the service's limiter for that request only. Calls run one after another in the
model's order; consecutive calls of tools marked ``parallel`` run together (at most
``max_concurrency``), and any other call is a barrier; results always go back in the model's
order. Limits (turns, tokens, cost, time) end the loop
with a ``stop_reason``, and the cell is scored as it stands: a limit is an outcome, not an
infrastructure error. A request that fails (after its retries) is the cell's infrastructure
error.

Call ids are made canonical per cell (``call_T_I``: turn T, call I), so a provider that sends
none, or the same one twice, still gets each result back under its own; the provider's ids are
kept beside them.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from evalhydra.core.values import (
    NO_CELL,
    CallContext,
    ChatRequest,
    Completion,
    ToolCall,
    ToolSpec,
    Usage,
    arguments_or_empty,
)
from evalhydra.execute.toolbox import Toolbox, ToolOutcome
from evalhydra.plan.tools import TOOL_CHOICES, LoopPlan
from evalhydra.services.base import Service

__all__ = ["LoopOutcome", "STOP_REASONS", "agent_turns", "assistant_message", "call_row", "combined",
           "first_messages", "request_params", "request_row", "run_loop"]

#: Why a loop ended.
STOP_REASONS = ("model_stopped", "submit", "turn_limit", "token_limit", "cost_limit", "time_limit")


@dataclass
class LoopOutcome:
    """A finished loop: the answer to score (its usage and cost summed over the turns), each
    turn's completion, and the trajectory kept in the row's details."""

    completion: Completion
    turns: list[Completion] = field(default_factory=list)
    stop_reason: str | None = None  # None: a request failed (the cell's infrastructure error)
    turn_rows: list[dict[str, Any]] = field(default_factory=list)
    call_rows: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None
    stderr: dict[str, str] = field(default_factory=dict)  # the end of each MCP server's stderr
    user_turns: list[Completion] = field(default_factory=list)  # a simulated user's replies
    user: dict[str, Any] | None = None  # a conversation's simulator: identity, who stopped, its costs

    def trajectory(self) -> dict[str, Any]:
        """What the store keeps (``details.trajectory``): the views ``turns`` and ``tool_calls`` read it.
        A transcript over :data:`MAX_TRANSCRIPT_CHARS` keeps every message with its text cut."""
        kept = {"stop_reason": self.stop_reason, "turns": self.turn_rows, "tool_calls": self.call_rows,
                "state": self.state, "transcript": _bounded(self.messages)}
        if self.user is not None:
            kept["user"] = self.user
        return {**kept, "stderr": self.stderr} if self.stderr else kept


#: Most characters of a cell's stored transcript (as JSON); past it each message's text is cut.
MAX_TRANSCRIPT_CHARS = 4_000_000


def _bounded(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript, or, when its JSON is over :data:`MAX_TRANSCRIPT_CHARS`, each message with its
    ``content`` and tool-call arguments cut to an equal share (the cut is said in the text)."""
    size = len(json.dumps(messages, ensure_ascii=False, default=str))
    if size <= MAX_TRANSCRIPT_CHARS or not messages:
        return messages
    share = max(200, MAX_TRANSCRIPT_CHARS // (2 * len(messages)))
    return [_cut_message(m, share) for m in messages]


def _cut_message(message: dict[str, Any], share: int) -> dict[str, Any]:
    out = dict(message)
    if isinstance(out.get("content"), str):
        out["content"] = _cut(out["content"], share)
    elif out.get("content") is not None:
        out["content"] = _cut(json.dumps(out["content"], ensure_ascii=False, default=str), share)
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [{**c, "function": {**c["function"], "arguments": _cut(
            str(c["function"].get("arguments") or ""), share)}} if isinstance(c, dict)
            and isinstance(c.get("function"), dict) else c for c in calls]
    return out


def _cut(text: str, share: int) -> str:
    return text if len(text) <= share else f"{text[:share]}… [cut: {len(text):,} characters stored in part]"


def request_params(loop: LoopPlan, tools: tuple[ToolSpec, ...]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if loop.tool_choice is not None:
        params["tool_choice"] = loop.tool_choice if loop.tool_choice in TOOL_CHOICES else {
            "type": "function", "function": {"name": loop.tool_choice}}
    if loop.parallel_tool_calls is not None:
        params["parallel_tool_calls"] = loop.parallel_tool_calls
    if loop.strict is not None:
        params["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters, "strict": loop.strict}}
            for t in tools]
    return params


def first_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """The conversation a loop starts from: the request's messages, or its one user message."""
    if request.messages:
        return [dict(m) for m in request.messages]
    return [{"role": "user", "content": request.user_content}]


async def run_loop(service: Service, request: ChatRequest, loop: LoopPlan,
                   toolbox: Toolbox, context: CallContext = NO_CELL) -> LoopOutcome:
    """Run the loop of one cell from its first request.

    Args:
        service: The chat service.
        request: The cell's rendered request (its conversation, tools and parameters).
        loop: The limits and choices.
        toolbox: The cell's tools.
        context: The cell every request is made for.
    """
    params = {**(request.params or {}), **request_params(loop, request.tools)}
    outcome = LoopOutcome(Completion(output="", model=""), messages=first_messages(request))
    with trio.move_on_after(loop.cell_timeout_s if loop.cell_timeout_s else math.inf) as scope:
        outcome.stop_reason = await agent_turns(service, replace(request, params=params or None), loop,
                                                toolbox, outcome, context)
    if scope.cancelled_caught:
        outcome.stop_reason = "time_limit"
    outcome.state = await toolbox.final_state()
    outcome.completion = combined(outcome)
    return outcome


async def agent_turns(service: Service, request: ChatRequest, loop: LoopPlan, toolbox: Toolbox,
                      outcome: LoopOutcome, context: CallContext) -> str | None:
    """The agent's requests from ``outcome.messages`` on, until it answers without a call (or
    submits) or a limit ends the loop: the stop reason (None: a request failed). Turns are numbered
    on from ``outcome.turns``, and ``loop.max_turns`` counts them all (a conversation's too)."""
    for turn in range(len(outcome.turns) + 1, loop.max_turns + 1):
        started = time.perf_counter()
        answer = await service.complete(replace(request, messages=tuple(outcome.messages)), context)
        outcome.turns.append(answer)
        outcome.turn_rows.append(request_row(turn, answer, (time.perf_counter() - started) * 1000))
        if answer.error_kind is not None:
            return None
        calls = [(call, f"call_{turn}_{i}") for i, call in enumerate(answer.tool_calls)]
        outcome.messages.append(assistant_message(answer, calls))
        if not calls:
            return "model_stopped"
        submitted = next((c for c, _ in calls if c.name == loop.submit_tool), None)
        if submitted is not None:
            outcome.turn_rows[-1]["submitted"] = submitted.arguments
            return "submit"
        results = await _run_calls(toolbox, calls, loop.max_concurrency)
        for group, ((call, canonical), result) in enumerate(zip(calls, results, strict=True)):
            outcome.messages.append({"role": "tool", "tool_call_id": canonical, "content": result.text})
            outcome.call_rows.append(call_row(turn, group, call, canonical, result, toolbox))
        limit = _limit_reached(loop, outcome.turns)
        if limit is not None:
            return limit
    return "turn_limit"


async def _run_calls(toolbox: Toolbox, calls: list[tuple[ToolCall, str]],
                     concurrency: int) -> list[ToolOutcome]:
    """Each call's outcome, in the model's order. Calls run in that order; a run of consecutive
    calls of parallel tools runs together (at most ``concurrency`` at once), and any other call
    waits for what came before and runs alone."""
    results: list[ToolOutcome | None] = [None] * len(calls)
    limiter = trio.CapacityLimiter(concurrency)

    async def one(index: int) -> None:
        async with limiter:
            results[index] = await toolbox.call(calls[index][0].name, calls[index][0].arguments)

    group: list[int] = []
    for index, (call, _) in enumerate([*calls, (None, "")]):
        if call is not None and toolbox.parallel(call.name):
            group.append(index)
            continue
        if group:  # the parallel calls before this one finish first
            async with trio.open_nursery() as nursery:
                for member in group:
                    nursery.start_soon(one, member)
            group = []
        if call is not None:
            await one(index)
    return [r for r in results if r is not None]


def _limit_reached(loop: LoopPlan, turns: list[Completion]) -> str | None:
    tokens = sum(t.usage.prompt_tokens + t.usage.completion_tokens for t in turns)
    if loop.max_tokens is not None and tokens >= loop.max_tokens:
        return "token_limit"
    if loop.max_cost_usd is not None and sum(t.cost_usd for t in turns) >= loop.max_cost_usd:
        return "cost_limit"
    return None


def assistant_message(answer: Completion, calls: list[tuple[ToolCall, str]]) -> dict[str, Any]:
    """An answer as the conversation keeps it: its text, and its calls under their canonical ids."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.output or None}
    if calls:
        message["tool_calls"] = [
            {"id": canonical, "type": "function",
             "function": {"name": call.name, "arguments": arguments_or_empty(call.arguments)}}
            for call, canonical in calls]
    return message


def request_row(turn: int, reply: Completion, latency_ms: float, side: str | None = None) -> dict[str, Any]:
    """One model request of a loop or conversation as a ``turns`` row (``side``: ``user`` for a
    simulated user's, left out for the agent's)."""
    usage = reply.usage
    row: dict[str, Any] = {"turn": turn, **({"side": side} if side else {}),
                           "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                           "cached_tokens": usage.cached_tokens, "cost_usd": reply.cost_usd,
                           "latency_ms": round(latency_ms, 3), "calls": len(reply.tool_calls),
                           "error_kind": str(reply.error_kind) if reply.error_kind else None,
                           "cached": reply.cached}
    if reply.ok:  # what the reply said of itself, for telemetry's chat spans
        row.update(model=reply.model, finish_reason=reply.finish_reason, response_id=reply.response_id,
                   reasoning_tokens=usage.reasoning_tokens or None)
    if reply.wire is not None:  # service.record_wire: as sent, for compare --attribute-server
        row["wire"] = reply.wire
    return row


def call_row(turn: int, index: int, call: ToolCall, canonical: str, result: ToolOutcome,
             toolbox: Toolbox) -> dict[str, Any]:
    """A call and its outcome as a ``tool_calls`` row."""
    return {"turn": turn, "index": index, "provider_id": call.id, "id": canonical, "name": call.name,
            "original_name": toolbox.original_name(call.name),
            "arguments": call.arguments, "parsed": result.arguments, "parallel": toolbox.parallel(call.name),
            "result": result.text, "result_cut": result.cut, "result_sha256": result.sha256,
            "error_kind": result.error_kind, "latency_ms": round(result.latency_ms, 3)}


def combined(outcome: LoopOutcome) -> Completion:
    """The completion the row and the matchers see: the last answer's text (or the submit tool's
    arguments), every call made, usage and cost summed; a failed request's error when one failed."""
    turns = outcome.turns
    if not turns:  # the time limit came before the first answer
        return Completion(output="", model="")
    last = turns[-1]
    calls = tuple(ToolCall(r["name"], r["arguments"], r["id"]) for r in outcome.call_rows)
    output = last.output
    if outcome.stop_reason == "submit" and outcome.turn_rows:
        output = outcome.turn_rows[-1].get("submitted") or output
    usage = sum((t.usage for t in turns), Usage())
    return replace(last, output=output, tool_calls=calls, usage=usage, attempts=(),
                   cost_usd=sum(t.cost_usd for t in turns), latency_ms=sum(t.latency_ms for t in turns))
