"""A chat message's content as plain text, whatever its shape (a string, or content parts)."""

from __future__ import annotations

from typing import Any

__all__ = ["message_text"]


def message_text(content: Any) -> str:
    """Return the text of a message's ``content`` (a string or content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and "text" in p]
        return "\n".join(str(p) for p in parts)
    return ""
