"""Build a :class:`TrialTrace` from an agent's session history JSON.

Two shapes are read (zrb writes the first; older tools the second), either
as a bare list or wrapped as ``{"history": [...]}``:

* pydantic-ai messages: ``{"kind": "response", "parts": [...]}`` where a part
  with ``part_kind == "tool-call"`` gives ``tool_name`` and ``args`` (a dict
  or a JSON string) and ``part_kind == "text"`` gives ``content``. An entry is
  an assistant turn if its ``kind`` is ``"response"`` or it has a text part.
* legacy entries: ``{"tool_name", "args"}``, ``{"tool_call": {"name",
  "arguments"|"args"}}``, ``{"role": "assistant", "content"}`` (one turn) and
  ``{"role": "tool", "name"}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalhydra.agents.models import ToolCallRecord, TrialTrace
from evalhydra.core import strictjson

__all__ = ["trace_from_history", "trace_from_data"]


def trace_from_history(path: Path) -> TrialTrace:
    """Parse ``path``; a missing, unreadable or malformed file gives an empty trace.

    Args:
        path: The session history file (``history/<session>.json``).

    Returns:
        The trace, never raising for bad input.
    """
    try:
        data = strictjson.loads_plain(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return TrialTrace()
    return trace_from_data(data)


def trace_from_data(data: Any) -> TrialTrace:
    """Build a trace from already-parsed history JSON (any shape; unknown → empty)."""
    builder = _TraceBuilder()
    for entry in _entries(data):
        parts = entry.get("parts")
        if isinstance(parts, list):
            builder.add_parts(entry, parts)
        else:
            builder.add_legacy(entry)
    return builder.build()


def _entries(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        data = data["history"] if isinstance(data.get("history"), list) else [data]
    if not isinstance(data, list):
        return []
    return [entry for entry in data if isinstance(entry, dict)]


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            decoded = strictjson.loads_plain(raw)
        except ValueError:
            return {}
        return decoded if isinstance(decoded, dict) else {}
    return {}


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class _TraceBuilder:
    def __init__(self) -> None:
        self.calls: list[ToolCallRecord] = []
        self.texts: list[str] = []
        self.turns = 0

    def add_parts(self, entry: dict[str, Any], parts: list[Any]) -> None:
        has_text = False
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("part_kind")
            if kind == "tool-call" and (name := _name(part.get("tool_name"))):
                self.calls.append(ToolCallRecord(name, _args(part.get("args"))))
            elif kind == "text":
                has_text = True
                if isinstance(content := part.get("content"), str) and content:
                    self.texts.append(content)
        if entry.get("kind") == "response" or has_text:
            self.turns += 1

    def add_legacy(self, entry: dict[str, Any]) -> None:
        if name := _name(entry.get("tool_name")):
            self.calls.append(ToolCallRecord(name, _args(entry.get("args"))))
            return
        call = entry.get("tool_call")
        if isinstance(call, dict) and (name := _name(call.get("name"))):
            self.calls.append(ToolCallRecord(name, _args(call.get("arguments") or call.get("args"))))
            return
        role = entry.get("role")
        if role == "assistant" and isinstance(content := entry.get("content"), str) and content:
            self.texts.append(content)
            self.turns += 1
        elif role == "tool" and (name := _name(entry.get("name"))):
            self.calls.append(ToolCallRecord(name, {}))

    def build(self) -> TrialTrace:
        return TrialTrace(
            tool_calls=self.calls,
            tool_names=[call.name for call in self.calls],
            assistant_text="\n".join(self.texts),
            turn_count=self.turns,
        )
