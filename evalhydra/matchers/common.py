"""Small helpers shared by the matchers: results, text and JSON utilities.

Everything here is pure and synchronous.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from omegaconf import DictConfig, ListConfig, OmegaConf

from evalhydra.core import strictjson
from evalhydra.core.messages import as_text
from evalhydra.core.values import MatchResult

__all__ = [
    "ASCII_WHITESPACE",
    "MISSING_IDEAL",
    "ascii_lower",
    "effective_ideal",
    "fail",
    "format_value",
    "is_number",
    "is_unit_number",
    "passed",
    "plain",
    "strict_json_loads",
    "strip_code_fence",
]

#: The whitespace zig_eval trims (``std.mem.trim(u8, s, " \t\r\n")``).
ASCII_WHITESPACE = " \t\r\n"

MISSING_IDEAL = "missing ideal"

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def passed(score: float = 1.0, details: dict[str, Any] | None = None) -> MatchResult:
    """Return a passing result."""
    return MatchResult(passed=True, score=score, details=details)


def fail(reason: str, score: float = 0.0, details: dict[str, Any] | None = None) -> MatchResult:
    """Return a failing result with the given reason."""
    return MatchResult(passed=False, score=score, reason=reason, details=details)


def ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only, like zig's ``std.ascii.toLower``."""
    return text.translate(_ASCII_LOWER)


def effective_ideal(case_ideal: str | None, default: str | None = None) -> str | None:
    """The ideal a text matcher compares against, or None when absent.

    A whitespace-only ideal counts as absent; then the matcher's configured
    ``ideal`` (if any) is used.
    """
    for candidate in (case_ideal, default):
        if candidate is not None and candidate.strip(ASCII_WHITESPACE):
            return candidate
    return None


def strict_json_loads(text: str) -> Any:
    """Parse standard JSON (NaN and Infinity are rejected); ints and floats stay distinct.

    Nesting is bounded and unpaired surrogates refused (:func:`evalhydra.core.strictjson.loads_plain`).

    Raises:
        ValueError: The text is not valid JSON.
    """
    return strictjson.loads_plain(text, constants=False)


def strip_code_fence(text: str) -> str:
    """Strip a Markdown code fence around the whole text (the aiwg rule).

    Strip whitespace; if the text starts with three backticks drop the first
    line, and drop the last line when it is three backticks.
    """
    stripped = text.strip()
    if not stripped.startswith("```"):
        return stripped
    lines = stripped.split("\n")[1:]
    if lines and lines[-1].strip() == "```":
        lines = lines[:-1]
    return "\n".join(lines)


def format_value(value: Any) -> str:
    """Render a value into a prompt: strings as is, a conversation as ``role: content``
    lines, anything else JSON-dumped."""
    return as_text(value)


def is_number(value: Any) -> TypeGuard[int | float]:
    """True for finite ints and floats (bools are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def is_unit_number(value: Any) -> TypeGuard[int | float]:
    """True for a number (not a bool) between 0 and 1 inclusive."""
    return is_number(value) and 0.0 <= value <= 1.0


def plain(value: Any) -> Any:
    """Turn OmegaConf containers, dataclasses and mappings into plain dicts and lists."""
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
