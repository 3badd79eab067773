"""Text matchers: ``exact_match``, ``includes`` (zig_eval) and ``regex``.

``exact_match`` and ``includes`` follow zig_eval exactly: ``case_sensitive`` and
``trim_whitespace`` default to true, case folding is ASCII-only, trimming
removes spaces, tabs, CR and LF, and a missing or whitespace-only ideal fails
with ``missing ideal``. The matcher option ``ideal`` is an evalhydra extension:
a default ideal used for cases that have none.

``regex`` searches the output (``re.search``) for ``pattern``. The literal
placeholder ``{ideal}`` in the pattern is replaced by the case's ideal,
escaped with :func:`re.escape`, so ``^\\s*{ideal}\\s*$`` checks an exact answer
with surrounding whitespace allowed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import MatchResult
from evalhydra.matchers.base import MatchContext, Matcher, sync_matcher
from evalhydra.matchers.common import (
    ASCII_WHITESPACE,
    MISSING_IDEAL,
    ascii_lower,
    effective_ideal,
    fail,
    passed,
)

__all__ = [
    "IDEAL_PLACEHOLDER",
    "REGEX_FLAGS",
    "build_exact_match",
    "build_includes",
    "build_regex",
    "check_regex",
    "compile_pattern",
    "exact_match",
    "includes",
    "parse_flags",
    "regex_match",
]

IDEAL_PLACEHOLDER = "{ideal}"

#: Flag names accepted in ``flags``, case-insensitive (``IGNORECASE``, ``i``, ``I`` …).
REGEX_FLAGS: dict[str, re.RegexFlag] = {
    "ignorecase": re.IGNORECASE,
    "i": re.IGNORECASE,
    "multiline": re.MULTILINE,
    "m": re.MULTILINE,
    "dotall": re.DOTALL,
    "s": re.DOTALL,
    "verbose": re.VERBOSE,
    "x": re.VERBOSE,
    "ascii": re.ASCII,
    "a": re.ASCII,
}


def _normalize(text: str, case_sensitive: bool, trim_whitespace: bool) -> str:
    if trim_whitespace:
        text = text.strip(ASCII_WHITESPACE)
    return text if case_sensitive else ascii_lower(text)


def exact_match(
    output: str, ideal: str | None, *, case_sensitive: bool = True, trim_whitespace: bool = True
) -> MatchResult:
    """Pass when the output equals the ideal (after the optional trim and case fold).

    Args:
        output: The candidate output.
        ideal: The reference answer; None or whitespace-only fails with ``missing ideal``.
        case_sensitive: Compare case-sensitively (ASCII folding otherwise).
        trim_whitespace: Trim spaces, tabs, CR and LF from both ends first.

    Returns:
        Score 1 on a match, else 0 with reason ``output did not exactly match ideal``.
    """
    ideal = effective_ideal(ideal)
    if ideal is None:
        return fail(MISSING_IDEAL)
    got = _normalize(output, case_sensitive, trim_whitespace)
    if got == _normalize(ideal, case_sensitive, trim_whitespace):
        return passed()
    return fail("output did not exactly match ideal")


def includes(
    output: str, ideal: str | None, *, case_sensitive: bool = True, trim_whitespace: bool = True
) -> MatchResult:
    """Pass when the output contains the ideal (after the optional trim and case fold).

    Args:
        output: The candidate output.
        ideal: The reference answer; None or whitespace-only fails with ``missing ideal``.
        case_sensitive: Compare case-sensitively (ASCII folding otherwise).
        trim_whitespace: Trim spaces, tabs, CR and LF from both ends first.

    Returns:
        Score 1 when included, else 0 with reason ``output did not include ideal``.
    """
    ideal = effective_ideal(ideal)
    if ideal is None:
        return fail(MISSING_IDEAL)
    got = _normalize(output, case_sensitive, trim_whitespace)
    if _normalize(ideal, case_sensitive, trim_whitespace) in got:
        return passed()
    return fail("output did not include ideal")


def parse_flags(names: Iterable[str]) -> re.RegexFlag:
    """Combine flag names (``IGNORECASE``, ``i``, ``MULTILINE``, ``m`` …) into re flags.

    Raises:
        ValueError: A name is not a known flag.
    """
    flags = re.RegexFlag(0)
    for name in names:
        if name.lower() not in REGEX_FLAGS:
            raise ValueError(f"unknown regex flag {name!r}")
        flags |= REGEX_FLAGS[name.lower()]
    return flags


def compile_pattern(pattern: str, flags: int, ideal: str | None) -> re.Pattern[str]:
    """Substitute the escaped ideal for ``{ideal}`` and compile the pattern."""
    if IDEAL_PLACEHOLDER in pattern:
        pattern = pattern.replace(IDEAL_PLACEHOLDER, re.escape(ideal or ""))
    return re.compile(pattern, flags)


def regex_match(output: str, pattern: str, *, flags: int = 0, ideal: str | None = None) -> MatchResult:
    """Pass when ``pattern`` is found anywhere in the output (``re.search``).

    Args:
        output: The candidate output.
        pattern: A Python regular expression; ``{ideal}`` is replaced by the escaped ideal.
        flags: Compiled regex flags.
        ideal: The ideal; needed only when the pattern uses ``{ideal}``.

    Returns:
        Score 1 on a match, else 0 with reason ``output did not match pattern``
        (``missing ideal`` when the pattern needs an ideal the case lacks).
    """
    ideal = effective_ideal(ideal)
    if IDEAL_PLACEHOLDER in pattern and ideal is None:
        return fail(MISSING_IDEAL)
    match = compile_pattern(pattern, flags, ideal).search(output)
    if match is None:
        return fail("output did not match pattern")
    return passed(details={"match": match.group(0)})


def check_regex(spec: dict[str, Any], where: str) -> None:
    """Load-time checks: the flags are known and the pattern compiles.

    Raises:
        EvalHydraError: Naming the bad flag or the compile error.
    """
    try:
        flags = parse_flags(spec.get("flags", []))
    except ValueError as exc:
        raise EvalHydraError(f"{where}: {exc}", f"Known flags: {', '.join(sorted(REGEX_FLAGS))}") from None
    try:
        compile_pattern(spec["pattern"], flags, "x")
    except re.error as exc:
        raise EvalHydraError(f"{where}: regex pattern does not compile: {exc}",
                             "Fix the pattern (Python regular expression syntax); escape a literal "
                             "bracket or dot with a backslash.") from None


def _text_options(spec: dict[str, Any]) -> dict[str, bool]:
    return {
        "case_sensitive": bool(spec.get("case_sensitive", True)),
        "trim_whitespace": bool(spec.get("trim_whitespace", True)),
    }


def build_exact_match(spec: dict[str, Any]) -> Matcher:
    """Build an ``exact_match`` matcher from a cleaned spec."""
    options, default = _text_options(spec), spec.get("ideal")

    def match(ctx: MatchContext) -> MatchResult:
        return _any_ideal(ctx, default, lambda ideal: exact_match(ctx.output, ideal, **options))

    return sync_matcher(match)


def _any_ideal(ctx: MatchContext, default: str | None,
               check: Callable[[str | None], MatchResult]) -> MatchResult:
    """Pass when the output matches any of the case's ideals (OpenAI-evals samples may list
    several); otherwise the first ideal's failure."""
    ideals = getattr(ctx.case, "ideals", ())
    if len(ideals) < 2:
        return check(effective_ideal(ctx.case.ideal, default))
    results = [check(ideal) for ideal in ideals]
    return next((r for r in results if r.passed), results[0])


def build_includes(spec: dict[str, Any]) -> Matcher:
    """Build an ``includes`` matcher from a cleaned spec."""
    options, default = _text_options(spec), spec.get("ideal")

    def match(ctx: MatchContext) -> MatchResult:
        return _any_ideal(ctx, default, lambda ideal: includes(ctx.output, ideal, **options))

    return sync_matcher(match)


def build_regex(spec: dict[str, Any]) -> Matcher:
    """Build a ``regex`` matcher from a cleaned spec."""
    pattern, default = spec["pattern"], spec.get("ideal")
    flags = parse_flags(spec.get("flags", []))

    def match(ctx: MatchContext) -> MatchResult:
        ideal = effective_ideal(ctx.case.ideal, default)
        return regex_match(ctx.output, pattern, flags=flags, ideal=ideal)

    return sync_matcher(match)
