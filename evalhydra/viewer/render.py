"""Stored text as a reader wants it: a chat transcript, pretty JSON or markdown, and word diffs.

Everything here returns escaped HTML (:class:`markupsafe.Markup`): stored text
is untrusted. Markdown is rendered by markdown-it-py with raw HTML off (it is
shown as text) and its link checks on (no ``javascript:`` links); the page's
security policy blocks scripts and outside images besides.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

__all__ = ["DIFF_TOKENS", "Rendered", "render_text", "word_diff"]

#: Words (and spaces and marks) of each side past which two outputs are not diffed (the diff's cost
#: grows with the product of the lengths).
DIFF_TOKENS = 40_000
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class Rendered:
    """A text rendered (``kind``: chat, json, markdown or text) and as it is stored."""

    kind: str
    html: Markup
    raw: str


@cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable("table")


def render_text(text: str | None) -> Rendered:
    """``text`` as a chat transcript (a JSON list of messages with roles), pretty JSON, or markdown."""
    raw = text or ""
    parsed = _json(raw)
    if isinstance(parsed, list) and parsed and all(isinstance(m, dict) and "role" in m for m in parsed):
        return Rendered("chat", _transcript(parsed), raw)
    if isinstance(parsed, (dict, list)):
        pretty = json.dumps(parsed, indent=2, ensure_ascii=False)
        return Rendered("json", Markup(f'<pre class="json">{html.escape(pretty)}</pre>'), raw)
    if not raw.strip():
        return Rendered("text", Markup('<span class="muted">(empty)</span>'), raw)
    return Rendered("markdown", Markup(_markdown().render(raw)), raw)


def _json(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def _transcript(messages: list[dict[str, Any]]) -> Markup:
    """System, user, assistant and tool turns, each with its text, and an assistant's tool calls."""
    turns = []
    for message in messages:
        role = str(message.get("role"))
        parts = [_content(message.get("content"))]
        for call in message.get("tool_calls") or []:
            function = call.get("function", call) if isinstance(call, dict) else {}
            name = function.get("name", "?") if isinstance(function, dict) else "?"
            arguments = function.get("arguments", "") if isinstance(function, dict) else ""
            parts.append(f'<div class="tool-call">→ {html.escape(str(name))}'
                         f"<pre>{html.escape(_arguments(arguments))}</pre></div>")
        label = role + (f" · {message['name']}" if message.get("name") else "")
        if message.get("tool_call_id"):
            label += f" · {message['tool_call_id']}"
        turns.append(f'<div class="turn role-{html.escape(role)}">'
                     f'<div class="role">{html.escape(label)}</div>{"".join(parts)}</div>')
    return Markup(f'<div class="transcript">{"".join(turns)}</div>')


def _content(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):  # parts: text, images, audio …
        texts = [str(p.get("text", "")) if isinstance(p, dict) and "text" in p else
                 f"[{p.get('type', 'part')}]" if isinstance(p, dict) else str(p) for p in content]
        content = "\n".join(texts)
    return _markdown().render(str(content))


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        parsed = _json(arguments)
        return json.dumps(parsed, indent=2, ensure_ascii=False) if parsed is not None else arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)


def word_diff(before: str | None, after: str | None) -> Markup | None:
    """``before`` → ``after`` word by word: removed words in ``<del>``, added ones in ``<ins>``;
    None when either side is too long to diff."""
    old, new = _TOKEN.findall(before or ""), _TOKEN.findall(after or "")
    if len(old) > DIFF_TOKENS or len(new) > DIFF_TOKENS:
        return None
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
        if op == "equal":
            out.append(html.escape("".join(old[i1:i2])))
            continue
        if i2 > i1:
            out.append(f"<del>{html.escape(''.join(old[i1:i2]))}</del>")
        if j2 > j1:
            out.append(f"<ins>{html.escape(''.join(new[j1:j2]))}</ins>")
    return Markup("".join(out))
