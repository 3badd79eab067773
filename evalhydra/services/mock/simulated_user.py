"""The mock as a simulated user: it says a case's scripted turns, and errs on purpose when told.

A simulated user's request (:mod:`evalhydra.execute.conversation`) carries, in its system
message, the case's script between ``<mock-user-script>`` and ``</mock-user-script>``:

``turns``
    What the user says, one message per turn (its own earlier messages are the request's
    ``assistant`` messages; the agent's are its ``user`` messages). A turn may act first on the
    user's own device: ``{"tool", "arguments", "say"}`` calls that tool of the user's, then,
    once its result is back, says ``say``.
``stop_when``
    Optional text: once the agent's last message contains it (case-insensitive), the user stops.
``leak``
    Optional text a ``leaked_answer`` error says that the user was not meant to say.
``stop``
    The stop signal (the eval's first ``user.stop_signals``), said after the last turn.
``errors``
    ``{"rate", "kinds", "seed"}`` (the eval's ``user.mock``), with ``cell``, the cell it plays:
    the cell errs when a hash of (cell, seed) falls under ``rate``, the kind by another hash, so
    every trial of every case draws its own, and a rerun draws the same.

Errors, each on the last scripted turn (the turn that finishes the task), or the first when there is one:

* ``premature_stop``: the stop signal instead of the turn (τ²-bench #182: the user stops before
  confirming);
* ``goal_drift``: another request instead (:data:`DRIFT`);
* ``contradicted_instructions``: the user declines what its instructions ask (:data:`DECLINE`);
* ``leaked_answer``: the turn, then ``leak`` (or the script's last turn) said outright.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from evalhydra.services.mock.text import message_text

__all__ = ["DECLINE", "DRIFT", "SCRIPT_END", "SCRIPT_START", "script_block", "user_message", "user_reply"]

SCRIPT_START = "<mock-user-script>"
SCRIPT_END = "</mock-user-script>"
#: What a drifting user asks instead of its goal.
DRIFT = "Actually, forget that. What are your opening hours?"
#: What a user contradicting its instructions says instead of going on.
DECLINE = "No, do not do that. I have changed my mind."


def script_block(script: dict[str, Any]) -> str:
    """The text that carries ``script`` to the mock in a simulated user's system message."""
    return f"\n\n{SCRIPT_START}{json.dumps(script, ensure_ascii=False, sort_keys=True)}{SCRIPT_END}"


def user_message(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The scripted user's next message (words, or a call of one of its own tools), or None when
    the request carries no script."""
    messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
    script = _script(messages)
    if script is None:
        return None
    turn = _next_turn(script, messages)
    if not isinstance(turn, dict):
        return {"role": "assistant", "content": turn}
    if messages and messages[-1].get("role") == "tool":  # its tool answered: now it says the turn
        return {"role": "assistant", "content": _words(turn)}
    said = sum(1 for m in messages if m.get("role") == "assistant" and not m.get("tool_calls"))
    call = {"name": str(turn.get("tool")), "arguments": json.dumps(turn.get("arguments") or {})}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"user_call_{said}", "type": "function", "function": call}]}


def user_reply(payload: dict[str, Any]) -> str | None:
    """The words of the scripted user's next message ("" for a tool call), or None without a script."""
    message = user_message(payload)
    return None if message is None else str(message.get("content") or "")


def _next_turn(script: dict[str, Any], messages: list[dict[str, Any]]) -> str | dict[str, Any]:
    """The script's next turn: its text, or a turn that acts first (``{"tool", "arguments", "say"}``)."""
    turns = list(script.get("turns") or [])
    stop = str(script.get("stop") or "###STOP###")
    said = sum(1 for m in messages if m.get("role") == "assistant" and not m.get("tool_calls"))
    heard = next((message_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    until = script.get("stop_when")
    if said and isinstance(until, str) and until and until.lower() in heard.lower():
        return stop
    if said >= len(turns):
        return stop
    kind = _error_kind(script)
    turn = turns[said] if isinstance(turns[said], dict) else str(turns[said])
    if kind is None or said != max(len(turns) - 1, 0):
        return turn
    if kind == "premature_stop":
        return stop
    if kind == "goal_drift":
        return DRIFT
    if kind == "contradicted_instructions":
        return DECLINE
    leak = script.get("leak") or _words(turns[-1])
    return f"{_words(turn)} (I was not supposed to say this: {leak})"


def _words(turn: Any) -> str:
    return str(turn.get("say") or "") if isinstance(turn, dict) else str(turn)


def _script(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    for message in messages:
        if message.get("role") != "system":
            continue
        text = message_text(message.get("content"))
        start = text.find(SCRIPT_START)
        end = text.find(SCRIPT_END, start + 1)
        if start < 0 or end < 0:
            continue
        try:
            found = json.loads(text[start + len(SCRIPT_START):end])
        except ValueError:
            return None
        return found if isinstance(found, dict) else None
    return None


def _error_kind(script: dict[str, Any]) -> str | None:
    """The error this cell's user makes (None: none), drawn by hashes of the cell and seed."""
    errors = script.get("errors") or {}
    rate = float(errors.get("rate") or 0.0)
    kinds = [str(k) for k in errors.get("kinds") or ["premature_stop"]]
    if rate <= 0 or not kinds:
        return None
    seed = f"{errors.get('seed', 0)}|{script.get('cell', '')}".encode()
    draw = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big") / 2**64
    if draw >= rate:
        return None
    which = int.from_bytes(hashlib.sha256(b"kind|" + seed).digest()[:8], "big")
    return kinds[which % len(kinds)]
