"""The simulated user's side of a conversation: its instructions, its view, its own tools.

The user sees the conversation from its side only (:func:`user_view`): its instructions as the
system message, the agent's words as ``user`` messages, its own as ``assistant`` messages, and
its own tool calls with their results (τ²-bench's dual control: it acts on its own device). It
never sees the agent's system prompt, tool calls or tool results, and the agent never sees the
user's tools. A user's reply (:meth:`SimulatedUser.reply`) runs its tool calls through a toolbox
of its own, as the agent's loop does, until it answers in words.
"""

from __future__ import annotations

from typing import Any

from evalhydra.core.messages import as_text, render
from evalhydra.core.values import CallContext, Case, ChatRequest, Completion
from evalhydra.execute.toolbox import Toolbox
from evalhydra.execute.toolloop import LoopOutcome, assistant_message, call_row, request_row
from evalhydra.plan.tools import LoopPlan, ToolImpl
from evalhydra.plan.users import OPTIONAL_FIELDS, UserPlan
from evalhydra.services.base import Service
from evalhydra.services.mock.simulated_user import script_block

__all__ = ["MAX_USER_TOOL_ROUNDS", "SimulatedUser", "user_instructions", "user_toolbox", "user_view"]

#: Most requests of the user's for one message when it keeps calling its tools.
MAX_USER_TOOL_ROUNDS = 10


class SimulatedUser:
    """The user side of one cell: the service that plays it, its plan, its rendered instructions,
    and its own tools (None: it has none)."""

    def __init__(self, service: Service, plan: UserPlan, instructions: str,
                 toolbox: Toolbox | None = None) -> None:
        self.service, self.plan, self.instructions, self.toolbox = service, plan, instructions, toolbox
        self.private: dict[int, list[dict[str, Any]]] = {}  # its tool exchanges, by the message they precede

    async def reply(self, outcome: LoopOutcome, turn: int, context: CallContext) -> Completion:
        """The user's ``turn``-th message, given the conversation so far (``outcome.messages``, the
        agent's transcript); each of its requests and tool calls is recorded in ``outcome``."""
        before = sum(1 for m in outcome.messages if m.get("role") == "user")
        exchange = self.private.setdefault(before, [])
        answer = Completion(output="", model="")
        for round_ in range(MAX_USER_TOOL_ROUNDS):
            view = user_view(self.instructions, outcome.messages, self.private)
            request = ChatRequest(user_content="", model=self.plan.model, tools=self.plan.tools,
                                  messages=tuple(view), params=dict(self.plan.params) or None)
            answer = await self.service.complete(request, context)
            outcome.user_turns.append(answer)
            outcome.turn_rows.append(request_row(turn, answer, answer.latency_ms, "user"))
            if answer.error_kind is not None or not answer.tool_calls or self.toolbox is None:
                return answer
            await self._run_calls(answer, turn, round_, exchange, outcome)
        return answer

    async def _run_calls(self, answer: Completion, turn: int, round_: int, exchange: list[dict[str, Any]],
                         outcome: LoopOutcome) -> None:
        assert self.toolbox is not None
        calls = [(call, f"user_{turn}_{round_}_{i}") for i, call in enumerate(answer.tool_calls)]
        exchange.append(assistant_message(answer, calls))
        for index, (call, canonical) in enumerate(calls):
            result = await self.toolbox.call(call.name, call.arguments)
            exchange.append({"role": "tool", "tool_call_id": canonical, "content": result.text})
            outcome.call_rows.append({**call_row(turn, index, call, canonical, result, self.toolbox),
                                      "side": "user"})


def user_toolbox(plan: UserPlan, root: Any, initial_state: Any) -> Toolbox | None:
    """The user's own tools for one cell (None when it has none): its ``tool_class``, made for the
    cell and set to the case's initial state."""
    if plan.tool_class is None:
        return None
    methods = tuple(ToolImpl(t.name, method=True) for t in plan.tools)
    return Toolbox(LoopPlan(tools=methods, tool_class=plan.tool_class), plan.tools, root,
                   initial_state=initial_state)


def user_instructions(plan: UserPlan, case: Case, cell: str) -> str:
    """The user's system message for ``case``: the eval's instructions filled from the case's
    ``user`` fields (those of :data:`OPTIONAL_FIELDS` it lacks read as empty), the stop signals,
    and the case's mock script when it has one."""
    fields: dict[str, Any] = dict.fromkeys(OPTIONAL_FIELDS, "")
    fields.update({k: v for k, v in (case.user or {}).items() if k != "script"})
    signals = (*plan.stop_signals, "", "")[:3]
    fields.update(stop=signals[0], transfer=signals[1] or signals[0], out_of_scope=signals[2] or signals[0])
    text = render(plan.instructions, {k: as_text(v) for k, v in fields.items()})
    script = (case.user or {}).get("script")
    if isinstance(script, dict):
        errors = {"rate": plan.mock.rate, "kinds": list(plan.mock.kinds), "seed": plan.mock.seed}
        text += script_block({**script, "stop": plan.stop_signals[0], "errors": errors, "cell": cell})
    return text


def user_view(instructions: str, transcript: list[dict[str, Any]],
              private: dict[int, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """The conversation as the user sees it: its instructions, the agent's words as ``user``
    messages, its own as ``assistant`` messages, and its own tool exchanges (``private``, keyed by
    how many of its messages came before them); no system prompt, tool call or result of the agent."""
    view: list[dict[str, Any]] = [{"role": "system", "content": instructions}]
    own = private or {}
    said = 0
    for message in transcript:
        role, content = message.get("role"), message.get("content")
        if role == "assistant" and content:
            view.append({"role": "user", "content": as_text(content)})
        elif role == "user":
            view += own.get(said, [])
            view.append({"role": "assistant", "content": as_text(content)})
            said += 1
    return view + own.get(said, [])
