"""Function names as OpenAI's chat API accepts them (``^[A-Za-z0-9_-]{1,64}$``).

MCP tools (``notes.list``) and BFCL functions (``math.factorial``) have names the API refuses:
characters outside ``[A-Za-z0-9_-]`` become ``_``, a name already taken gets its owner's name as
a prefix, and a name past 64 characters is cut and given a hash suffix.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["MAX_NAME", "file_safe", "openai_name"]

#: The longest function name OpenAI accepts.
MAX_NAME = 64
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def openai_name(owner: str, name: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """An OpenAI function name for ``owner``'s tool ``name``, not one of ``taken``."""
    mapped = _INVALID.sub("_", name) or "tool"
    if mapped in taken:
        mapped = f"{_INVALID.sub('_', owner)}__{mapped}"
    if len(mapped) > MAX_NAME or mapped in taken:
        suffix = hashlib.sha256(f"{owner}\0{name}".encode()).hexdigest()[:8]
        mapped = f"{mapped[:MAX_NAME - 9]}_{suffix}"
    return mapped


def file_safe(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_-]`` as ``_``."""
    return _INVALID.sub("_", name)
