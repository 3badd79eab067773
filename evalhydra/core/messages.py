"""Chat messages and prompt templates: what a case sends when it is more than one string.

* A case's ``input`` is a string (zig_eval) or a list of chat messages
  (``{"role": system|user|assistant|tool, "content": str | [content parts]}``), sent as
  the conversation. :func:`check_messages` validates a list when the dataset is read.
* An eval's ``prompt`` (a string) or ``messages`` (a list of messages) is a template
  filled from each case's fields with ``{{field}}`` placeholders (the aiwg syntax);
  :func:`fill` fills one and names a variable the case lacks.
* :func:`as_text` renders a conversation for judges and rubric evaluators.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "PLACEHOLDER",
    "ROLES",
    "MessageError",
    "as_text",
    "check_messages",
    "fill",
    "is_conversation",
    "placeholders",
    "render",
]

#: ``{{ name }}``: the placeholder of prompt templates and aiwg evaluator prompts.
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
ROLES = ("system", "user", "assistant", "tool")


class MessageError(ValueError):
    """A message list or a template that cannot be used (the loader adds file and line)."""


def render(template: str, variables: Mapping[str, str]) -> str:
    """Replace ``{{name}}`` with ``variables[name]`` in one pass; unknown names stay."""

    def substitute(match: re.Match[str]) -> str:
        return variables.get(match.group(1), match.group(0))

    return PLACEHOLDER.sub(substitute, template)


def placeholders(text: str) -> set[str]:
    """The placeholder names used in ``text``."""
    return set(PLACEHOLDER.findall(text))


def is_conversation(value: Any) -> bool:
    """True for a list whose first item is a message (a dict with a ``role``)."""
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict) and "role" in value[0]


def check_messages(value: Any, *, need_user: bool = True) -> tuple[dict[str, Any], ...]:
    """Validate a conversation and return it as a tuple of plain dicts; with ``need_user`` False
    (a simulated user's conversation, whose user speaks later) it may hold no user message.

    Raises:
        MessageError: Naming the message and what is wrong with it.
    """
    if not isinstance(value, list) or not value:
        raise MessageError("messages must be a non-empty list of {role, content} objects")
    for index, message in enumerate(value):
        _check_message(index, message)
    if need_user and not any(m["role"] == "user" for m in value):
        raise MessageError("messages need at least one user message")
    return tuple(dict(m) for m in value)


def _check_message(index: int, message: Any) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise MessageError(f"{where} must be an object with 'role' and 'content'")
    role = message.get("role")
    if role not in ROLES:
        raise MessageError(f"{where}.role is {role!r}; use one of {', '.join(ROLES)}")
    content = message.get("content")
    if content is None and role == "assistant" and message.get("tool_calls"):
        return
    if isinstance(content, str):
        return
    if isinstance(content, list) and content and all(isinstance(p, dict) and "type" in p for p in content):
        return
    raise MessageError(f"{where}.content must be a string or a list of content parts ({{'type': ...}})")


def as_text(value: Any) -> str:
    """A value as prompt text: a string as is, a conversation as ``role: content`` lines,
    anything else as JSON."""
    if isinstance(value, str):
        return value
    if is_conversation(value):
        return "\n\n".join(f"{m['role']}: {_content_text(m.get('content'))}" for m in value)
    return json.dumps(value, ensure_ascii=False)


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", f"[{p.get('type')}]")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def fill(template: Any, fields: Mapping[str, Any]) -> Any:
    """Fill a ``prompt`` (string) or ``messages`` (list) template from a case's fields.

    A field's value goes in as is when it is a string, else as JSON.

    Raises:
        MessageError: A placeholder names a field the case does not have.
    """
    used = _template_placeholders(template)
    missing = sorted(used - set(fields))
    if missing:
        have = ", ".join(sorted(fields)) or "none"
        raise MessageError(f"template variable '{missing[0]}' is not a field of this case (fields: {have})")
    values = {name: as_text(fields[name]) for name in used}
    return _fill(template, values)


def _template_placeholders(template: Any) -> set[str]:
    if isinstance(template, str):
        return placeholders(template)
    if isinstance(template, Sequence | Mapping):
        items = template.values() if isinstance(template, Mapping) else template
        return set().union(*(_template_placeholders(v) for v in items)) if items else set()
    return set()


def _fill(template: Any, values: Mapping[str, str]) -> Any:
    if isinstance(template, str):
        return render(template, values)
    if isinstance(template, Mapping):
        return {k: _fill(v, values) for k, v in template.items()}
    if isinstance(template, list | tuple):
        return [_fill(v, values) for v in template]
    return template
