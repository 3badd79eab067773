"""Token counts from an agent's output, and their cost.

Each template reports usage its own way; the last report in the log wins
(agents print cumulative totals), and no report means zeros.

* zrb prints ``💸 (Requests: 4 | Tool Calls: 7 | Total: 1500) Input: 1000 |
  Audio Input: 0 | Output: 500 | Audio Output: 0 | Cache Read: 200 | ...``;
  the ``Audio`` fields are ignored. Input includes cache reads (pydantic-ai).
* claude-code prints one JSON object whose ``usage`` block has
  ``input_tokens``, ``output_tokens`` and ``cache_read_input_tokens``; input
  excludes cache reads, and total = input + output + cache read.
* opencode: ``Tokens: 1,234 input, 567 output, 89 cache read`` (commas
  optional, the cache part optional); input excludes cache reads, and
  total = input + output + cache read. This line format is evalhydra's
  convention for opencode-style CLIs; wrap a CLI to print it if needed.

For a custom ``service.argv`` all three are tried in that order.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from evalhydra.config.schema import PricingConfig
from evalhydra.core.values import MAX_TOKEN_COUNT

__all__ = [
    "UsageOutOfRange",
    "TokenUsage",
    "cost_usd",
    "last_json_object",
    "parse_claude_usage",
    "parse_opencode_usage",
    "parse_usage",
    "parse_zrb_usage",
]

_ZRB_LINE = re.compile(
    r"💸\s*\([^)\n]*Total:\s*(?P<total>\d+)[^)\n]*\)"
    r"[^\n]*?(?<!Audio )Input:\s*(?P<input>\d+)"
    r"[^\n]*?(?<!Audio )Output:\s*(?P<output>\d+)"
    r"[^\n]*?Cache Read:\s*(?P<cache>\d+)"
)
_OPENCODE_LINE = re.compile(
    r"Tokens:\s*(?P<input>\d[\d,]*)\s+input,\s*(?P<output>\d[\d,]*)\s+output"
    r"(?:,\s*(?P<cache>\d[\d,]*)\s+cache read)?",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts of one trial.

    ``cache_in_input`` says whether ``input_tokens`` already counts the cache
    reads (zrb) or not (claude-code, opencode); :func:`cost_usd` needs it.
    """

    total_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_in_input: bool = False


def parse_zrb_usage(text: str) -> TokenUsage:
    """Parse the last zrb ``💸`` line (zeros when there is none)."""
    matches = list(_ZRB_LINE.finditer(text))
    if not matches:
        return TokenUsage()
    last = matches[-1]
    return TokenUsage(
        total_tokens=int(last["total"]),
        input_tokens=int(last["input"]),
        output_tokens=int(last["output"]),
        cache_read_tokens=int(last["cache"]),
        cache_in_input=True,
    )


def parse_opencode_usage(text: str) -> TokenUsage:
    """Parse the last ``Tokens: I input, O output, C cache read`` line."""
    matches = list(_OPENCODE_LINE.finditer(text))
    if not matches:
        return TokenUsage()
    last = matches[-1]
    counts = [int((last[key] or "0").replace(",", "")) for key in ("input", "output", "cache")]
    return _uncached_input_usage(*counts)


def parse_claude_usage(text: str) -> TokenUsage:
    """Parse the ``usage`` block of the last JSON object in claude-code's output."""
    data = last_json_object(text)
    usage = data.get("usage") if data else None
    if not isinstance(usage, dict):
        return TokenUsage()
    counts = [_int(usage.get(key)) for key in ("input_tokens", "output_tokens", "cache_read_input_tokens")]
    return _uncached_input_usage(*counts)


def _uncached_input_usage(input_tokens: int, output_tokens: int, cache: int) -> TokenUsage:
    return TokenUsage(
        total_tokens=input_tokens + output_tokens + cache,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache,
    )


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinity
        return 0


_PARSERS = {
    "zrb": parse_zrb_usage,
    "claude-code": parse_claude_usage,
    "opencode": parse_opencode_usage,
}


def parse_usage(text: str, template: str | None) -> TokenUsage:
    """Parse usage the way ``template`` reports it (None: try all three).

    Raises:
        UsageOutOfRange: A count past :data:`~evalhydra.core.values.MAX_TOKEN_COUNT`.
    """
    if template in _PARSERS:
        return _in_range(_PARSERS[template](text))
    for parser in _PARSERS.values():
        usage = parser(text)
        if usage != TokenUsage():
            return _in_range(usage)
    return TokenUsage()


class UsageOutOfRange(ValueError):  # noqa: N818 (a ValueError like int()'s)
    """An agent reported a token count past any real one."""


def _in_range(usage: TokenUsage) -> TokenUsage:
    for name in ("total_tokens", "input_tokens", "output_tokens", "cache_read_tokens"):
        value = getattr(usage, name)
        if value > MAX_TOKEN_COUNT:
            shown = str(value) if value < 10**30 else f"a {len(str(value))}-digit number"
            raise UsageOutOfRange(f"the agent reported {name}={shown}, past any real count")
    return usage


def last_json_object(text: str) -> dict[str, Any] | None:
    """Return the last top-level JSON object in ``text`` (tolerates log noise around it)."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            found = obj
        pos = text.find("{", end)
    return found


def cost_usd(usage: TokenUsage, pricing: PricingConfig) -> float:
    """Price ``usage`` in USD (rates per million tokens).

    Cache reads use ``cached_input_per_mtok`` (or the input rate when unset);
    the remaining input uses ``input_per_mtok``.
    """
    cached = usage.cache_read_tokens
    uncached = usage.input_tokens - cached if usage.cache_in_input else usage.input_tokens
    cached_rate = pricing.cached_input_per_mtok
    if cached_rate is None:
        cached_rate = pricing.input_per_mtok
    total = (
        max(uncached, 0) * pricing.input_per_mtok
        + cached * cached_rate
        + usage.output_tokens * pricing.output_per_mtok
    )
    return total / 1_000_000
