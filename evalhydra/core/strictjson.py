"""JSON read as zig_eval reads it: strictly.

Python's ``json`` accepts what Zig's ``std.json`` refuses: a key repeated in
one object (the last one silently wins), an escaped UTF-16 surrogate without
its pair, and ``NaN``/``Infinity``. And it turns a number too large for a
double into ``inf``, so ``1e999`` would equal ``2e999``. Here all four are
handled as zig_eval does: the first three are invalid JSON, and an overflowing
number is kept as its literal text (:class:`NumberLiteral`), which compares
equal only to the same text.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["DuplicateKeyError", "NumberLiteral", "error_line", "loads"]

_SURROGATE = re.compile("[\ud800-\udfff]")


class NumberLiteral(str):
    """A JSON number too large for a double, kept as the text it was written as."""

    __slots__ = ()


class DuplicateKeyError(ValueError):
    """An object names one key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate object key {key!r}")
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return result


def error_line(text: str, exc: ValueError) -> int | None:
    """The 1-based line of a parse error: the syntax error's, or the repeated key's second spelling."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.lineno
    if isinstance(exc, DuplicateKeyError):
        spellings = list(re.finditer(re.escape(json.dumps(exc.key)) + r"\s*:", text))
        if len(spellings) > 1:
            return text.count("\n", 0, spellings[1].start()) + 1
    return None


def _float(text: str) -> float | NumberLiteral:
    value = float(text)
    return NumberLiteral(text) if math.isinf(value) else value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every call: ``json.loads`` with hooks builds a new one each time, a large
#: share of a chat reply's parse.
_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_float, parse_constant=_constant)


def loads(text: str | bytes) -> Any:
    """Parse JSON strictly (see the module docstring).

    Raises:
        ValueError: Invalid JSON (``json.JSONDecodeError`` for syntax, with its position),
            a duplicate key, an unpaired surrogate escape, or ``NaN``/``Infinity``.
    """
    if isinstance(text, bytes):
        # An object whose second byte is not NUL is UTF-8: detect_encoding would say so too.
        utf8 = text[:1] == b"{" and text[1:2] != b"\x00"
        text = text.decode("utf-8" if utf8 else json.detect_encoding(text), "surrogatepass")
    elif text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    value = _decode(text)
    escaped = "\\u" in text
    if escaped and _has_lone_surrogate(value):
        raise ValueError("unpaired UTF-16 surrogate escape")
    return value


def _decode(text: str) -> Any:
    """``JSONDecoder.decode``, without its two whitespace scans for a text that starts with ``{``."""
    if not text.startswith("{"):
        return _DECODER.decode(text)
    value, end = _DECODER.raw_decode(text)
    if end != len(text) and text[end:].strip(" \t\n\r"):
        raise json.JSONDecodeError("Extra data", text, len(text) - len(text[end:].lstrip(" \t\n\r")))
    return value


def _has_lone_surrogate(value: Any) -> bool:
    """True when a string in ``value`` holds a surrogate (a paired escape decodes to one character)."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False
