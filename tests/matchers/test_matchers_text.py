"""exact_match, includes and regex: zig_eval's defaults and exact failure strings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case
from evalhydra.matchers import MatchContext, build_matcher, validate_matcher
from evalhydra.matchers.text import exact_match, includes, parse_flags, regex_match


def ctx(output: str, ideal: str | None = None) -> MatchContext:
    return MatchContext(case=Case(id="c1", input="q", ideal=ideal), output=output)


@pytest.mark.parametrize(
    ("output", "ideal", "options", "reason"),
    [
        ("OK", "OK", {}, None),
        ("  OK\n", "OK", {}, None),
        ("\tOK\r\n", " OK ", {}, None),
        ("  OK\n", "OK", {"trim_whitespace": False}, "output did not exactly match ideal"),
        ("ok", "OK", {}, "output did not exactly match ideal"),
        ("ok", "OK", {"case_sensitive": False}, None),
        ("OKAY", "OK", {}, "output did not exactly match ideal"),
        ("OK", None, {}, "missing ideal"),
        ("OK", "", {}, "missing ideal"),
        ("OK", " \t\n", {}, "missing ideal"),
        # case folding is ASCII-only
        ("É", "é", {"case_sensitive": False}, "output did not exactly match ideal"),
        ("ÀB", "Àb", {"case_sensitive": False}, None),
        # only space, tab, CR and LF are trimmed
        ("\u00a0OK", "OK", {}, "output did not exactly match ideal"),
    ],
)
def test_exact_match(output: str, ideal: str | None, options: dict, reason: str | None) -> None:
    result = exact_match(output, ideal, **options)
    assert result.reason == reason
    assert result.passed is (reason is None)
    assert result.score == (1.0 if reason is None else 0.0)


@pytest.mark.parametrize(
    ("output", "ideal", "options", "reason"),
    [
        ("The answer is red mug.", "red mug", {}, None),
        ("The answer is Red Mug.", "red mug", {}, "output did not include ideal"),
        ("The answer is Red Mug.", "red mug", {"case_sensitive": False}, None),
        ("blue cup", "red mug", {}, "output did not include ideal"),
        ("red mug", "  red mug  ", {}, None),
        ("red mug", "  red mug  ", {"trim_whitespace": False}, "output did not include ideal"),
        ("anything", None, {}, "missing ideal"),
        ("anything", "   ", {}, "missing ideal"),
    ],
)
def test_includes(output: str, ideal: str | None, options: dict, reason: str | None) -> None:
    result = includes(output, ideal, **options)
    assert (result.passed, result.reason) == (reason is None, reason)


@pytest.mark.parametrize(
    ("output", "pattern", "flags", "ideal", "reason"),
    [
        ("answer: 42", r"\d+", [], None, None),
        ("answer: none", r"\d+", [], None, "output did not match pattern"),
        ("Hello", r"^hello$", ["IGNORECASE"], None, None),
        ("Hello", r"^hello$", ["i"], None, None),
        ("Hello", r"^hello$", [], None, "output did not match pattern"),
        ("a\nb", r"^b$", ["MULTILINE"], None, None),
        ("a\nb", r"a.b", ["s"], None, None),
        ("a\nb", r"a.b", [], None, "output did not match pattern"),
        # {ideal} is substituted escaped: the dot and the plus are literal
        ("cost: 1.5+tax", r"cost: {ideal}", [], "1.5+tax", None),
        ("cost: 1x5+tax", r"cost: {ideal}", [], "1.5+tax", "output did not match pattern"),
        ("x", r"^{ideal}$", [], None, "missing ideal"),
        ("x", r"^{ideal}$", [], "  ", "missing ideal"),
        # regex braces are untouched
        ("aaa", r"^a{3}$", [], None, None),
    ],
)
def test_regex(output: str, pattern: str, flags: list, ideal: str | None, reason: str | None) -> None:
    result = regex_match(output, pattern, flags=parse_flags(flags), ideal=ideal)
    assert (result.passed, result.reason) == (reason is None, reason)


def test_parse_flags_combines_and_rejects_unknown() -> None:
    assert parse_flags(["ignorecase", "M", "s"]) == re.I | re.M | re.S
    with pytest.raises(ValueError, match="unknown regex flag 'q'"):
        parse_flags(["q"])


@pytest.mark.parametrize(
    ("spec", "output", "ideal", "passed"),
    [
        ({"kind": "exact_match"}, " OK ", "OK", True),
        ({"kind": "exact_match", "case_sensitive": False}, "ok", "OK", True),
        ({"kind": "includes"}, "say OK", "OK", True),
        # the matcher's ideal is the default for cases without one
        ({"kind": "includes", "ideal": "OK"}, "say OK", None, True),
        ({"kind": "includes", "ideal": "OK"}, "say no", "no", True),
        ({"kind": "regex", "pattern": r"^\s*{ideal}\s*$", "flags": ["i"]}, " ok ", "OK", True),
        ({"kind": "regex", "pattern": r"\d"}, "none", None, False),
    ],
)
async def test_built_text_matchers(
    tmp_path: Path, spec: dict, output: str, ideal: str | None, passed: bool
) -> None:
    matcher = build_matcher(spec, registry_root=tmp_path, judges=None)
    assert (await matcher(ctx(output, ideal))).passed is passed


def test_regex_validation_errors(tmp_path: Path) -> None:
    with pytest.raises(EvalHydraError, match=r"^m: regex pattern does not compile"):
        validate_matcher({"kind": "regex", "pattern": "("}, "m", registry_root=tmp_path)
    with pytest.raises(EvalHydraError, match=r"unknown regex flag 'BOGUS'"):
        validate_matcher({"kind": "regex", "pattern": "x", "flags": ["BOGUS"]}, "m", registry_root=tmp_path)
    with pytest.raises(EvalHydraError, match=r"needs 'pattern'"):
        validate_matcher({"kind": "regex"}, "m", registry_root=tmp_path)
