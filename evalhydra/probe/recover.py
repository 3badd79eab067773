"""The calls a model made, read from a reply's raw wire past the faults a server adds.

evalhydra's own reader follows the API (stream deltas keyed by ``index``, calls only in
``tool_calls``). This reader is the reference for attribution: it regroups stream deltas by call
``id`` (so calls a server sent under one reused index come apart again), keeps a call's name
once, appends a bare final delta to the call it ends, and reads calls a server left in the
content as chat-template markup (Hermes ``<tool_call>``, Mistral ``[TOOL_CALLS]``, Llama
``<function=…>``). What a server destroyed (arguments altered, a character's bytes split into
U+FFFD) it cannot give back.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["recovered_calls", "same_calls"]

_HERMES = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
_LLAMA = re.compile(r"<function=(\w+)>\s*(\{.*?\})\s*</function>", re.S)
_MISTRAL = "[TOOL_CALLS]"
_DECODER = json.JSONDecoder()


def recovered_calls(wire: Any) -> list[tuple[str, Any]]:
    """The (name, arguments) of each call a recorded reply holds (``service.record_wire``)."""
    if not isinstance(wire, dict):
        return []
    if isinstance(wire.get("deltas"), list):
        calls = _from_deltas(wire["deltas"])
    else:
        functions = [c.get("function") or {} for c in wire.get("tool_calls") or [] if isinstance(c, dict)]
        calls = [(str(f.get("name")), _arguments(f.get("arguments")))
                 for f in functions if isinstance(f, dict)]
    content = wire.get("content")
    return calls or _from_markup(content if isinstance(content, str) else "")


def same_calls(left: list[tuple[str, Any]], right: list[tuple[str, Any]]) -> bool:
    """Whether two lists of calls are the same calls, in any order."""
    return sorted(map(_canonical, left)) == sorted(map(_canonical, right))


def _canonical(call: tuple[str, Any]) -> str:
    return json.dumps([call[0], call[1]], sort_keys=True, ensure_ascii=False)


def _arguments(raw: Any) -> Any:
    """Arguments as JSON (``""`` as ``{}``); text that is not JSON as it is."""
    if isinstance(raw, dict):
        return raw
    try:
        return json.loads(raw or "{}")
    except (TypeError, ValueError):
        return raw


def _from_deltas(deltas: list[Any]) -> list[tuple[str, Any]]:
    """Stream deltas regrouped: an id starts a call (a repeated id continues it), a new index
    without an id starts one, a delta with neither continues the last call."""
    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    by_index: dict[Any, dict[str, Any]] = {}
    for delta in deltas:
        if not isinstance(delta, dict):
            continue
        function: dict[str, Any] = delta["function"] if isinstance(delta.get("function"), dict) else {}
        call = _call_of(delta, calls, by_id, by_index)
        if isinstance(function.get("name"), str) and function["name"] and not call["name"]:
            call["name"] = function["name"]
        if isinstance(function.get("arguments"), str):
            call["arguments"] += function["arguments"]
    return [(c["name"], _arguments(c["arguments"])) for c in calls if c["name"]]


def _call_of(delta: dict[str, Any], calls: list[dict[str, Any]], by_id: dict[str, dict[str, Any]],
             by_index: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """The call a delta belongs to, made when it starts one."""
    ident, index = delta.get("id"), delta.get("index")
    if ident and ident in by_id:
        return by_id[ident]
    if not ident and index is not None and index in by_index:
        return by_index[index]
    if not ident and index is None and calls:
        return calls[-1]
    call: dict[str, Any] = {"name": "", "arguments": ""}
    calls.append(call)
    if ident:
        by_id[ident] = call
    by_index[index] = call
    return call


def _from_markup(content: str) -> list[tuple[str, Any]]:
    """Calls a server left in the content as chat-template markup."""
    found: list[tuple[str, Any]] = []
    for block in _HERMES.findall(content):
        try:
            call = json.loads(block)
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            found.append((call["name"], _arguments(call.get("arguments", call.get("parameters")))))
    found += [(name, _arguments(arguments)) for name, arguments in _LLAMA.findall(content)]
    if _MISTRAL in content:
        start = content.index(_MISTRAL) + len(_MISTRAL)
        start += len(content[start:]) - len(content[start:].lstrip())
        try:
            listed, _ = _DECODER.raw_decode(content, start)
        except ValueError:
            listed = []
        if isinstance(listed, list):  # [TOOL_CALLS] 5 is no list of calls
            found += [(str(c.get("name")), _arguments(c.get("arguments")))
                      for c in listed if isinstance(c, dict)]
    return found
