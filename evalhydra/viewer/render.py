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

__all__ = ["DIFF_LINES", "DIFF_TOKENS", "MAX_JSON_DEPTH", "MAX_RENDER_CHARS", "Rendered", "render_dialogue",
           "render_text",
           "word_diff"]

#: Words (and spaces and marks) of each side past which two outputs are diffed by lines instead
#: (the diff's cost grows with the product of the lengths: two outputs that differ at every other
#: word take seconds past a few thousand words).
DIFF_TOKENS = 4_000
#: Lines of each side past which two outputs are not diffed at all.
DIFF_LINES = 2_000
#: Characters of a stored text rendered as markdown or a transcript; the rest is in the raw view.
MAX_RENDER_CHARS = 20_000
#: Nesting past which a JSON text is shown as text, not pretty-printed.
MAX_JSON_DEPTH = 100
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class Rendered:
    """A text rendered (``kind``: chat, json, markdown or text) and as it is stored."""

    kind: str
    html: Markup
    raw: str
    partial: bool = False  # only the first MAX_RENDER_CHARS were rendered: "open raw" shows all


@cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable("table")


def render_text(text: str | None) -> Rendered:
    """``text`` as a chat transcript (a JSON list of messages with roles), pretty JSON, or markdown."""
    raw = text or ""
    parsed = _json(raw)
    if isinstance(parsed, list) and parsed and all(isinstance(m, dict) and "role" in m for m in parsed) \
            and len(raw) <= MAX_RENDER_CHARS:
        return Rendered("chat", _transcript(parsed), raw)
    if isinstance(parsed, (dict, list)):
        pretty = json.dumps(parsed, indent=2, ensure_ascii=False)
        return Rendered("json", Markup(f'<pre class="json">{html.escape(pretty)}</pre>'), raw)
    if not raw.strip():
        return Rendered("text", Markup('<span class="muted">(empty)</span>'), raw)
    shown = raw[:MAX_RENDER_CHARS]
    return Rendered("markdown", Markup(_markdown().render(shown)), raw, partial=len(shown) < len(raw))


def _json(text: str) -> Any:
    """``text`` parsed when it is a JSON object or array nested at most :data:`MAX_JSON_DEPTH`
    deep, else None (a deeper one is shown as text: it would exhaust the recursion of a parser)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{" or _depth(stripped) > MAX_JSON_DEPTH:
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


def _depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (strings' brackets counted too: an upper bound)."""
    deepest = level = 0
    for char in text:
        if char in "[{":
            level += 1
            deepest = max(deepest, level)
            if deepest > MAX_JSON_DEPTH:
                return deepest
        elif char in "]}":
            level -= 1
    return deepest


#: How a conversation with a simulated user names each role.
DIALOGUE_ROLES = {"user": "simulated user", "assistant": "agent", "tool": "tool result", "system": "system"}


def render_dialogue(messages: list[dict[str, Any]]) -> Markup:
    """A conversation with a simulated user as a dialogue: the user's and the agent's turns named
    as such, the agent's tool calls and their results between them."""
    return _transcript(messages, DIALOGUE_ROLES)


def _transcript(messages: list[dict[str, Any]], names: dict[str, str] | None = None) -> Markup:
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
        label = (names or {}).get(role, role) + (f" · {message['name']}" if message.get("name") else "")
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
    if len(old) > DIFF_TOKENS or len(new) > DIFF_TOKENS:  # long: line by line, or not at all
        old, new = (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True)
        if len(old) > DIFF_LINES or len(new) > DIFF_LINES:
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
