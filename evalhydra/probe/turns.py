"""Probes over several turns: the chat API's tool-result round trip (call ids unique across turns)
and the Responses API's ``function_call`` / ``function_call_output`` pairing and reasoning items.

Each turn's request is built from the reply before it, so these are sent one after another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from evalhydra.probe.catalog import responses_bodies, round_trip
from evalhydra.probe.checks import FAIL, NA, PASS, Check, Verdict
from evalhydra.probe.exchange import Exchange, send

__all__ = ["RESPONSES_CHECKS", "TURN_CHECKS", "responses_turns", "chat_turns"]

#: Most turns of the chat round trip (the script asks for two calls, then an answer).
_TURNS = 3
#: What the probe's tool answers, whichever it is.
_RESULT = "Sunny, 21 degrees."


async def chat_turns(client: httpx.AsyncClient, url: str, model: str) -> dict[str, Exchange]:
    """The two-step script answered turn by turn, each call's result sent back."""
    history: list[dict[str, Any]] = []
    found: dict[str, Exchange] = {}
    for turn in range(1, _TURNS + 1):
        exchange = await send(client, url, f"turn_{turn}", round_trip(model, history), model)
        found[exchange.name] = exchange
        message = exchange.message()
        if not exchange.ok or not message.get("tool_calls"):
            break
        history.append({"role": "assistant", "content": message.get("content"),
                        "tool_calls": message["tool_calls"]})
        history += [{"role": "tool", "tool_call_id": call.get("id") or "", "content": _RESULT}
                    for call in message["tool_calls"] if isinstance(call, dict)]
    return found


async def responses_turns(client: httpx.AsyncClient, url: str, model: str) -> dict[str, Exchange]:
    """A function call asked for, then its output sent back paired by ``call_id`` (with any
    reasoning items of the first reply sent back as they came)."""
    first_body, _ = responses_bodies(model)
    first = await send(client, url, "responses_call", first_body, model)
    found = {first.name: first}
    calls = _items(first, "function_call")
    if not first.ok or not calls:
        return found
    carried = _items(first, "reasoning", "function_call")
    answers = [{"type": "function_call_output", "call_id": c.get("call_id", ""), "output": _RESULT}
               for c in calls]
    second_body = {**first_body, "input": [*first_body["input"], *carried, *answers]}
    second = await send(client, url, "responses_output", second_body, model)
    found[second.name] = second
    return found


def _items(exchange: Exchange, *kinds: str) -> list[dict[str, Any]]:
    """A Responses API reply's output items of the given types, in order."""
    output = exchange.body.get("output") if isinstance(exchange.body, dict) else None
    return [i for i in output or [] if isinstance(i, dict) and i.get("type") in kinds]


def _round_trip(x: Mapping[str, Exchange]) -> Verdict:
    turns = [x[name] for name in ("turn_1", "turn_2", "turn_3") if name in x]
    first, last = x["turn_1"], turns[-1]
    if not first.ok:
        return Verdict(NA if first.refused else FAIL, f"no usable reply: {first.error}", first.evidence())
    if not first.calls():
        return Verdict(NA, "the model made no call to answer")
    if not last.ok:
        return Verdict(FAIL, f"a tool result sent back was not taken: {last.error}", last.evidence())
    return Verdict(PASS, f"{len(turns)} turns, each tool result taken")


def _ids_across_turns(x: Mapping[str, Exchange]) -> Verdict:
    ids = [c.get("id") for name in ("turn_1", "turn_2", "turn_3") if name in x
           for c in x[name].message().get("tool_calls") or [] if isinstance(c, dict)]
    if len(ids) < 2:
        return Verdict(NA, "fewer than two calls over the turns")
    return Verdict(PASS, "each call its own id", ids) if len(set(ids)) == len(ids) \
        else Verdict(FAIL, "a later turn's call reuses an earlier call's id", ids)


def _call_id(x: Mapping[str, Exchange]) -> Verdict:
    first = x["responses_call"]
    if not first.ok:
        return Verdict(NA if first.refused else FAIL, f"no usable reply: {first.error}", first.evidence())
    calls = _items(first, "function_call")
    if not calls:
        return Verdict(NA, "the model made no call")
    return Verdict(PASS, "every function_call has a call_id", calls) if all(c.get("call_id") for c in calls) \
        else Verdict(FAIL, "a function_call without a call_id: its output cannot be paired", calls)


def _pairing(x: Mapping[str, Exchange]) -> Verdict:
    if "responses_output" not in x:
        return Verdict(NA, "no function_call to answer")
    second = x["responses_output"]
    if not second.ok:
        return Verdict(FAIL, f"the function_call_output was not taken: {second.error}", second.evidence())
    return Verdict(PASS, "the output paired by call_id was taken", second.body)


def _reasoning(x: Mapping[str, Exchange]) -> Verdict:
    items = _items(x["responses_call"], "reasoning")
    if not items or "responses_output" not in x:
        return Verdict(NA, "no reasoning item to send back")
    second = x["responses_output"]
    return Verdict(PASS, "the reasoning items sent back were taken") if second.ok \
        else Verdict(FAIL, f"reasoning items sent back were refused: {second.error}", second.evidence())


TURN_CHECKS: tuple[Check, ...] = (
    Check("tool_result_round_trip", "tool results sent back are taken, turn after turn", _round_trip),
    Check("call_ids_across_turns", "call ids unique across turns", _ids_across_turns),
)
RESPONSES_CHECKS: tuple[Check, ...] = (
    Check("responses_call_id", "every function_call has a call_id", _call_id),
    Check("responses_pairing", "function_call_output paired by call_id is taken", _pairing),
    Check("responses_reasoning", "reasoning items round-trip", _reasoning),
)
