"""A conversation: a simulated user and the agent take turns until the user stops, or a limit does.

The agent's side is the tool loop (:func:`~evalhydra.execute.toolloop.agent_turns`): each user
message starts agent requests that run tools until the agent answers in words. Then the user
replies, seeing the conversation from its side only: its instructions as the system message,
the agent's words as ``user`` messages and its own as ``assistant`` messages (never the agent's
system prompt, tool calls or tool results), and acting on its own tools when it has them
(:mod:`evalhydra.execute.user_side`). A user message holding one of the stop signals
ends the conversation (``user_stop``, ``user_transfer``, ``user_out_of_scope``: the first,
second and third signal); so do the user's turn limit (``user_turn_limit``) and every limit of
the loop. A limit is an outcome, scored as the conversation stands.

Both sides' requests go through their service's retries, limits, cache and cost accounting; the
user's usage and cost are kept apart (``details.trajectory.user``), never in the cell's cost.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import trio

from evalhydra.core.messages import as_text
from evalhydra.core.values import NO_CELL, CallContext, ChatRequest, Completion, Usage
from evalhydra.execute.toolbox import Toolbox
from evalhydra.execute.toolloop import LoopOutcome, agent_turns, combined, first_messages, request_params
from evalhydra.execute.user_side import SimulatedUser
from evalhydra.plan.tools import LoopPlan
from evalhydra.services.base import Service

__all__ = ["USER_STOP_REASONS", "run_conversation"]

#: How a conversation the user ended ended, by the stop signal's place in ``user.stop_signals``.
USER_STOP_REASONS = ("user_stop", "user_transfer", "user_out_of_scope")


async def run_conversation(agent: Service, user: SimulatedUser, request: ChatRequest, loop: LoopPlan,
                           toolbox: Toolbox, context: CallContext = NO_CELL) -> LoopOutcome:
    """Run one cell's conversation from the case's opening.

    The case's own user message, when it has one, is the user's first; otherwise the agent
    greets (``user.greeting``) and the user speaks first.

    Args:
        agent: The service under test.
        user: The simulated user.
        request: The cell's rendered request (the agent's system prompt, tools and parameters).
        loop: The agent's limits (``max_turns`` counts its requests over the whole conversation).
        toolbox: The cell's tools.
        context: The cell every request is made for.
    """
    params = {**(request.params or {}), **request_params(loop, request.tools)}
    opening, given = _opening(request, user.plan.greeting)
    outcome = LoopOutcome(Completion(output="", model=""), messages=opening)
    with trio.move_on_after(loop.cell_timeout_s if loop.cell_timeout_s else math.inf) as scope:
        outcome.stop_reason = await _talk(agent, user, replace(request, params=params or None), loop, toolbox,
                                          outcome, context, given)
    if scope.cancelled_caught:
        outcome.stop_reason = "time_limit"
    outcome.state = await toolbox.final_state()
    outcome.completion = _failed_user(outcome) or combined(outcome)
    outcome.user = _user_summary(user, outcome)
    if user.toolbox is not None:  # the user's own device, as it ends
        outcome.user["state"] = await user.toolbox.final_state()
    return outcome


def _opening(request: ChatRequest, greeting: str) -> tuple[list[dict[str, Any]], bool]:
    """The agent's first messages, and whether the case gave the user's first message."""
    messages = first_messages(request)
    if messages and messages[-1].get("role") == "user" and as_text(messages[-1].get("content")).strip():
        return messages, True
    if messages and messages[-1].get("role") == "user":
        messages = messages[:-1]
    return [*messages, {"role": "assistant", "content": greeting}], False


async def _talk(agent: Service, user: SimulatedUser, request: ChatRequest, loop: LoopPlan, toolbox: Toolbox,
                outcome: LoopOutcome, context: CallContext, given: bool) -> str | None:
    for said in range(1, user.plan.max_turns + 1):
        if said > 1 or not given:
            reply = await user.reply(outcome, said, context)
            if reply.error_kind is not None:
                return None  # the user's request failed: the cell's infrastructure error
            outcome.messages.append({"role": "user", "content": reply.output})
            signal = _signal(reply.output, user.plan.stop_signals)
            if signal is not None:
                return USER_STOP_REASONS[min(signal, 2)]
        rows, calls = len(outcome.turn_rows), len(outcome.call_rows)
        stop = await agent_turns(agent, request, loop, toolbox, outcome, context)
        for row in (*outcome.turn_rows[rows:], *outcome.call_rows[calls:]):
            row["side"] = "agent"
        if stop != "model_stopped":
            return stop
    return "user_turn_limit"


def _failed_user(outcome: LoopOutcome) -> Completion | None:
    """The user's failed request as the cell's answer, when it is what ended the conversation (its
    infrastructure error is the cell's, as a failed request of the agent's is)."""
    last = outcome.user_turns[-1] if outcome.user_turns else None
    if outcome.stop_reason is not None or last is None or last.error_kind is None:
        return None
    return replace(combined(outcome), error_kind=last.error_kind, error_message=last.error_message,
                   status_code=last.status_code, error_detail=last.error_detail)


def _signal(text: str, signals: tuple[str, ...]) -> int | None:
    """The place of the first stop signal ``text`` holds (None: it holds none)."""
    return next((i for i, signal in enumerate(signals) if signal in text), None)


#: Most characters of the user's instructions kept with a conversation (for its audit).
MAX_INSTRUCTIONS_CHARS = 20_000


def _user_summary(user: SimulatedUser, outcome: LoopOutcome) -> dict[str, Any]:
    """What the store keeps of the user side: the simulator's identity and instructions, who ended
    the conversation, and the user's requests, tokens and cost (apart from the agent's)."""
    plan = user.plan
    usage = sum((t.usage for t in outcome.user_turns), Usage())
    reason = outcome.stop_reason
    stopped_by = "user" if reason in USER_STOP_REASONS else "limit" if reason else None
    if reason in ("model_stopped", "submit"):
        stopped_by = "agent"
    return {"simulator": plan.identity, "simulator_digest": plan.digest, "stopped_by": stopped_by,
            "instructions": user.instructions[:MAX_INSTRUCTIONS_CHARS],
            "requests": len(outcome.user_turns), "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cost_usd": round(sum(t.cost_usd for t in outcome.user_turns), 10)}
