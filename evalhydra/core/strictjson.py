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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError

__all__ = ["MAX_DEPTH", "DuplicateKeyError", "NumberLiteral", "error_line", "json_lines", "loads",
           "loads_plain", "stored", "too_deep"]

_SURROGATE = re.compile("[\ud800-\udfff]")
#: Deepest nesting of arrays and objects accepted from outside. Real replies, datasets and
#: histories stay far below it; deeper input would exhaust the parsers' (and every later
#: walker's) recursion.
MAX_DEPTH = 100


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
        # Strict decoding: an encoded surrogate (ED A0 80) is no UTF-8, as Zig's std.json says.
        utf8 = text[:1] == b"{" and text[1:2] != b"\x00"
        text = text.decode("utf-8" if utf8 else json.detect_encoding(text))
    elif text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _checked(text, _decode)


_PLAIN = json.JSONDecoder()
_NO_CONSTANTS = json.JSONDecoder(parse_constant=_constant)


def loads_plain(text: str | bytes, *, constants: bool = True) -> Any:
    """Parse JSON by Python's rules (a repeated key's last value wins), but safely: nesting at
    most :data:`MAX_DEPTH` deep and no unpaired surrogate in any string.

    For JSON that is not zig_eval's to judge (agent histories, stored columns, schemas).

    Args:
        text: The JSON text (bytes must be UTF-8).
        constants: Accept ``NaN`` and ``Infinity`` (Python's json does; standard JSON does not).

    Raises:
        ValueError: Invalid JSON, too deep, an unpaired surrogate, or bytes that are not UTF-8.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return _checked(text, (_PLAIN if constants else _NO_CONSTANTS).decode)


_UNSET: Any = object()


def stored(value: Any, fallback: Any = _UNSET) -> Any:
    """A JSON column as a store holds it, decoded safely (:func:`loads_plain`).

    Args:
        value: The column's value: JSON text, or anything else (returned as it is).
        fallback: What text that is not JSON gives (default: the text itself).
    """
    if not isinstance(value, str):
        return value
    try:
        return loads_plain(value)
    except ValueError:
        return value if fallback is _UNSET else fallback


def _checked(text: str, decode: Any) -> Any:
    """Decode ``text``, refusing what would poison a run: deep nesting and lone surrogates."""
    if _SURROGATE.search(text):
        raise ValueError("unpaired UTF-16 surrogate in the text")
    try:
        value = decode(text)
    except RecursionError:
        raise ValueError(f"JSON nested more than {MAX_DEPTH} levels deep") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(value):
        raise ValueError(f"JSON nested more than {MAX_DEPTH} levels deep")
    if "\\u" in text and _has_lone_surrogate(value):
        raise ValueError("unpaired UTF-16 surrogate escape")
    return value


def too_deep(value: Any) -> bool:
    """Whether arrays and objects nest deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


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


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON-lines file, parsed (:func:`loads_plain`), with its number.

    Raises:
        EvalHydraError: ``path:line: invalid JSON: …`` for the first line that is not; a file that
            is not UTF-8 text or cannot be read, naming it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        at = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise EvalHydraError(f"{path}:{at}: not UTF-8 text (byte {exc.start}: {exc.reason}).",
                             "Save the file as UTF-8.") from None
    except OSError as exc:
        raise EvalHydraError(f"{path}: cannot be read: {exc.strerror or exc}.") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, loads_plain(line)
        except ValueError as exc:
            raise EvalHydraError(f"{path}:{number}: invalid JSON: {exc}.") from None
