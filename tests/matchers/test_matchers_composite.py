"""all_of, any_of, weighted: verdicts, scores, per-part details, judges and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, ErrorKind, MatchResult
from evalhydra.matchers import MatchContext, build_matcher, validate_matcher
from evalhydra.matchers.composite import Part, combine
from evalhydra.testing.judges import ScriptedJudge, judge_error

EXACT = {"kind": "exact_match"}
INCLUDES = {"kind": "includes"}
DIGITS = {"kind": "regex", "pattern": r"\d"}


def ctx(output: str, ideal: str | None = "OK") -> MatchContext:
    return MatchContext(case=Case(id="c", input="q", ideal=ideal), output=output)


@pytest.mark.parametrize(
    ("spec", "output", "passed", "score", "reason"),
    [
        ({"kind": "all_of", "parts": [INCLUDES, DIGITS]}, "OK 1", True, 1.0, None),
        (
            {"kind": "all_of", "parts": [INCLUDES, EXACT, DIGITS]},
            "no",
            False,
            0.0,
            "part 1 (includes): output did not include ideal; part 2 (exact_match): output did not"
            " exactly match ideal; part 3 (regex): output did not match pattern",
        ),
        (
            {"kind": "all_of", "parts": [INCLUDES, EXACT, DIGITS]},
            "OK 1",
            False,
            0.0,
            "part 2 (exact_match): output did not exactly match ideal",
        ),
        ({"kind": "any_of", "parts": [EXACT, DIGITS]}, "OK 1", True, 1.0, None),
        (
            {"kind": "any_of", "parts": [EXACT, DIGITS]},
            "no",
            False,
            0.0,
            "no part passed: part 1 (exact_match): output did not exactly match ideal; "
            "part 2 (regex): output did not match pattern",
        ),
        ({"kind": "weighted", "parts": [INCLUDES, EXACT]}, "OK 1", True, 0.5, None),
        (
            {"kind": "weighted", "threshold": 0.6, "parts": [INCLUDES, EXACT]},
            "OK 1",
            False,
            0.5,
            "weighted score 0.500 below threshold 0.600: part 2 (exact_match): output did not exactly match"
            " ideal",
        ),
        (
            {"kind": "weighted", "parts": [{**INCLUDES, "weight": 3}, EXACT]},
            "OK 1",
            True,
            0.75,
            None,
        ),
        (
            {"kind": "weighted", "parts": [{**INCLUDES, "weight": 1}, {**EXACT, "weight": 3}]},
            "OK 1",
            False,
            0.25,
            "weighted score 0.250 below threshold 0.500: part 2 (exact_match): output did not exactly match"
            " ideal",
        ),
        # nesting
        (
            {"kind": "any_of", "parts": [EXACT, {"kind": "all_of", "parts": [INCLUDES, DIGITS]}]},
            "OK 7",
            True,
            1.0,
            None,
        ),
    ],
)
async def test_composites(
    tmp_path: Path, spec: dict, output: str, passed: bool, score: float, reason: str | None
) -> None:
    result = await build_matcher(spec, registry_root=tmp_path, judges=None)(ctx(output))
    assert (result.passed, result.score, result.reason) == (passed, score, reason)
    assert result.details is not None
    assert [p["kind"] for p in result.details["parts"]] == [p["kind"] for p in spec["parts"]]


async def test_part_details(tmp_path: Path) -> None:
    spec = {"kind": "weighted", "parts": [{**INCLUDES, "weight": 2}, EXACT]}
    result = await build_matcher(spec, registry_root=tmp_path, judges=None)(ctx("OK!"))
    assert result.details == {
        "parts": [
            {"kind": "includes", "passed": True, "score": 1.0, "reason": None, "weight": 2.0},
            {
                "kind": "exact_match",
                "passed": False,
                "score": 0.0,
                "reason": "output did not exactly match ideal",
                "weight": 1.0,
            },
        ]
    }


def test_validation_cleans_parts(tmp_path: Path) -> None:
    spec = {"kind": "weighted", "parts": [{**INCLUDES, "weight": 2, "ideal": None}, EXACT]}
    assert validate_matcher(spec, "m", registry_root=tmp_path) == {
        "kind": "weighted",
        "threshold": 0.5,
        "parts": [
            {"kind": "includes", "case_sensitive": True, "trim_whitespace": True, "weight": 2.0},
            {"kind": "exact_match", "case_sensitive": True, "trim_whitespace": True, "weight": 1.0},
        ],
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "all_of", "parts": []}, r"^m: 'parts' must be a non-empty list"),
        ({"kind": "all_of"}, r"^m: matcher kind 'all_of' needs 'parts'"),
        ({"kind": "all_of", "parts": [{"kind": "exact"}]}, r"^m\.parts\[0\]: unknown matcher kind"),
        ({"kind": "any_of", "parts": [{**EXACT, "weight": 1}]}, r"^m\.parts\[0\]: 'weight' applies only"),
        ({"kind": "weighted", "parts": [{**EXACT, "weight": -1}]}, r"'weight' must be a number >= 0"),
        ({"kind": "weighted", "parts": [{**EXACT, "weight": 0}]}, r"part weights .* sum to 0"),
        ({"kind": "all_of", "parts": [EXACT], "threshold": 0.5}, r"key 'threshold' is not allowed"),
        (
            {"kind": "any_of", "parts": [{"kind": "all_of", "parts": [{"kind": "regex", "pattern": "("}]}]},
            r"^m\.parts\[0\]\.parts\[0\]: regex pattern does not compile",
        ),
    ],
)
def test_composite_validation_errors(tmp_path: Path, spec: dict, message: str) -> None:
    with pytest.raises(EvalHydraError, match=message):
        validate_matcher(spec, "m", registry_root=tmp_path)


def _judged(service: str) -> dict:
    return {"kind": "model_grade", "judge_service": service, "rubric": "R", "pass_score": 0.5}


async def test_judges_of_all_parts_are_called_and_merged(tmp_path: Path) -> None:
    judge = ScriptedJudge(['{"score":0.9,"passed":true,"reason":"good"}'], services=["a", "b"])
    spec = {"kind": "all_of", "parts": [_judged("a"), _judged("b"), INCLUDES]}
    result = await build_matcher(spec, registry_root=tmp_path, judges=judge)(ctx("OK"))
    assert result.passed and result.score == 0.9
    assert sorted(service for service, _ in judge.calls) == ["a", "b"]
    assert result.judge is not None and result.judge.attempt_count == 2


@pytest.mark.parametrize(
    ("kind", "others", "error_kind"),
    [
        # another part already fails: the verdict does not depend on the errored judge
        ("all_of", [EXACT], None),
        ("all_of", [INCLUDES], ErrorKind.SERVER_ERROR),
        ("any_of", [INCLUDES], None),
        ("any_of", [EXACT], ErrorKind.SERVER_ERROR),
    ],
)
async def test_error_kind_only_when_it_could_change_the_verdict(
    tmp_path: Path, kind: str, others: list, error_kind: ErrorKind | None
) -> None:
    judge = ScriptedJudge([judge_error()], services=["a"])
    spec = {"kind": kind, "parts": [_judged("a"), *others]}
    result = await build_matcher(spec, registry_root=tmp_path, judges=judge)(ctx("OK!"))
    assert result.error_kind is error_kind
    assert result.details is not None
    assert result.details["parts"][0]["error_kind"] == "server_error"


def test_combine_takes_feedback_from_a_rubric_part() -> None:
    async def never(ctx: MatchContext) -> MatchResult:
        raise AssertionError

    parts = [Part("exact_match", never), Part("rubric", never)]
    rubric = MatchResult(
        False, 0.4, "too vague", feedback="too vague", rubric_scores={"a": 0.4}, failure_category="content"
    )
    result = combine("all_of", parts, [MatchResult(True, 1.0), rubric], 0.5)
    assert (result.feedback, result.rubric_scores, result.failure_category) == (
        "too vague",
        {"a": 0.4},
        "content",
    )
    assert result.reason == "part 2 (rubric): too vague"
