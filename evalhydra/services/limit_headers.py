"""A provider's rate-limit headers, read: a budget's limit, what remains of it and when it is
whole again, from OpenAI's ``x-ratelimit-*`` (durations in minutes, seconds, milliseconds) or
Anthropic's ``anthropic-ratelimit-*`` (an RFC 3339 reset time). Every value a provider may send
wrongly (negative, not a number, a date in the past) reads as absent, never as an error."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from datetime import datetime

__all__ = ["COARSE_RESET_S", "budget_of", "parse_duration", "seconds_until"]

#: A reset time written in whole seconds (RFC 3339) this close is too coarse to imply a rate.
COARSE_RESET_S = 2.0

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | None) -> float | None:
    """Seconds of an ``x-ratelimit-reset-*`` value: OpenAI's duration (``h``, ``m``, ``s`` and ``ms``
    parts run together) or bare seconds.

    Returns:
        The seconds, or None when absent or unreadable.
    """
    if not text:
        return None
    text = text.strip().lower()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def budget_of(headers: Mapping[str, str], kind: str) -> tuple[float | None, float | None, float | None]:
    """(limit, remaining, seconds to a full budget) of the ``requests`` or ``tokens`` budget, from
    OpenAI's ``x-ratelimit-*`` (durations in minutes, seconds, milliseconds) or Anthropic's
    ``anthropic-ratelimit-*`` (an RFC 3339 reset time); None for what the headers do not say."""
    limit = _number(headers.get(f"x-ratelimit-limit-{kind}"))
    remaining = _number(headers.get(f"x-ratelimit-remaining-{kind}"))
    reset = parse_duration(headers.get(f"x-ratelimit-reset-{kind}"))
    if limit is None and remaining is None and reset is None:
        limit = _number(headers.get(f"anthropic-ratelimit-{kind}-limit"))
        remaining = _number(headers.get(f"anthropic-ratelimit-{kind}-remaining"))
        reset = seconds_until(headers.get(f"anthropic-ratelimit-{kind}-reset"))
        if reset is not None and reset < COARSE_RESET_S:  # whole seconds say too little this close
            reset = None
    return limit, remaining, reset


def seconds_until(stamp: str | None) -> float | None:
    """Seconds from now to an RFC 3339 time (0 for one past); None when it is none."""
    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())
