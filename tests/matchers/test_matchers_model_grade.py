"""model_grade: zig_eval's prompt byte for byte, strict judge parsing, judge failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, ErrorKind
from evalhydra.matchers import MatchContext, build_matcher, model_grade_prompt, validate_matcher
from evalhydra.matchers.model_grade import parse_judge_reply
from evalhydra.testing.judges import ScriptedJudge, judge_error, judge_reply

GOLDEN = (
    "You are grading an LLM or product response for an eval.\n"
    "\n"
    "Rubric:\n"
    "Score whether the answer is correct, complete, and concise.\n"
    "\n"
    "Passing score:\n"
    "0.800\n"
    "\n"
    "Eval input:\n"
    "Reply with exactly OK.\n"
    "\n"
    "Candidate output:\n"
    "OK\n"
    "\n"
    "Ideal answer:\n"
    "OK\n"
    "\n"
    "Return JSON only with this exact shape:\n"
    '{"score":0.0,"passed":false,"reason":"short explanation"}\n'
    "\n"
    "Score must be between 0 and 1. Set passed to true only when score is greater than or "
    "equal to the passing score.\n"
)
RUBRIC = "Score whether the answer is correct, complete, and concise."
SPEC = {"kind": "model_grade", "judge_service": "judge", "rubric": RUBRIC, "pass_score": 0.8}


def test_prompt_golden() -> None:
    assert model_grade_prompt(RUBRIC, 0.8, "Reply with exactly OK.", "OK", "OK") == GOLDEN


def test_prompt_without_ideal_and_default_score() -> None:
    prompt = model_grade_prompt("R", 1.0, "in", "out", None)
    assert "Passing score:\n1.000\n\n" in prompt
    assert "Ideal answer:\nNo ideal answer was provided.\n\nReturn JSON only" in prompt


@pytest.mark.parametrize(
    ("content", "parsed"),
    [
        ('{"score":0.9,"passed":true,"reason":"good"}', (0.9, True, "good")),
        ('{"score":1,"passed":true,"reason":" fine \\n"}', (1.0, True, "fine")),
        ('{"score":0,"passed":false,"reason":"bad","extra":1}', (0.0, False, "bad")),
        ('  {"score":0.5,"passed":false,"reason":"meh"}  ', (0.5, False, "meh")),
        ('```json\n{"score":0.9,"passed":true,"reason":"good"}\n```', None),
        ('Sure! {"score":0.9,"passed":true,"reason":"good"}', None),
        ('{"score":1.1,"passed":true,"reason":"r"}', None),
        ('{"score":-0.1,"passed":false,"reason":"r"}', None),
        ('{"score":"0.9","passed":true,"reason":"r"}', None),
        ('{"score":true,"passed":true,"reason":"r"}', None),
        ('{"score":0.9,"passed":"true","reason":"r"}', None),
        ('{"score":0.9,"passed":1,"reason":"r"}', None),
        ('{"score":0.9,"passed":true,"reason":"   "}', None),
        ('{"score":0.9,"passed":true,"reason":null}', None),
        ('{"score":0.9,"passed":true}', None),
        ('[0.9, true, "r"]', None),
        ("", None),
    ],
)
def test_parse_judge_reply(content: str, parsed: tuple | None) -> None:
    assert parse_judge_reply(content) == parsed


def case(ideal: str | None = "OK") -> MatchContext:
    return MatchContext(case=Case(id="c", input="Reply with exactly OK.", ideal=ideal), output="OK")


@pytest.mark.parametrize(
    ("reply", "passed", "score", "reason"),
    [
        ('{"score":0.9,"passed":true,"reason":"good"}', True, 0.9, None),
        ('{"score":0.8,"passed":true,"reason":"ok"}', True, 0.8, None),
        # both the judge's verdict and the score must pass; the score is kept
        ('{"score":0.7,"passed":true,"reason":"too short"}', False, 0.7, "too short"),
        ('{"score":0.95,"passed":false,"reason":"wrong"}', False, 0.95, "wrong"),
    ],
)
async def test_model_grade_verdicts(
    tmp_path: Path, reply: str, passed: bool, score: float, reason: str | None
) -> None:
    judge = ScriptedJudge([reply])
    matcher = build_matcher(SPEC, registry_root=tmp_path, judges=judge)
    result = await matcher(case())
    assert (result.passed, result.score, result.reason) == (passed, score, reason)
    assert result.error_kind is None
    assert result.judge is judge.replies[0]


async def test_model_grade_request(tmp_path: Path) -> None:
    judge = ScriptedJudge(['{"score":1,"passed":true,"reason":"r"}'])
    spec = {**SPEC, "judge_model": "judge-large"}
    await build_matcher(spec, registry_root=tmp_path, judges=judge)(case())
    [(service, request)] = judge.calls
    assert service == "judge"
    assert request.user_content == GOLDEN
    assert (request.model, request.system_prompt, request.tools) == ("judge-large", None, ())


async def test_model_grade_defaults_model_and_non_string_input(tmp_path: Path) -> None:
    judge = ScriptedJudge(['{"score":1,"passed":true,"reason":"r"}'])
    spec = {"kind": "model_grade", "judge_service": "judge", "rubric": RUBRIC}
    context = MatchContext(case=Case(id="c", input={"q": "é"}, ideal=" "), output="x")
    await build_matcher(spec, registry_root=tmp_path, judges=judge)(context)
    request = judge.calls[0][1]
    assert request.model is None
    assert 'Eval input:\n{"q": "é"}\n' in request.user_content
    assert "Passing score:\n1.000\n" in request.user_content
    assert "No ideal answer was provided." in request.user_content


async def test_invalid_judge_output(tmp_path: Path) -> None:
    judge = ScriptedJudge([judge_reply("I think it's fine", attempts=2)])
    result = await build_matcher(SPEC, registry_root=tmp_path, judges=judge)(case())
    assert (result.passed, result.score, result.reason) == (False, 0.0, "InvalidModelGradeJudgeOutput")
    assert result.error_kind is ErrorKind.INVALID_RESPONSE
    assert result.judge is not None and result.judge.attempt_count == 2


async def test_failed_judge_call(tmp_path: Path) -> None:
    failure = judge_error("rate limited upstream", ErrorKind.RATE_LIMITED, 429)
    judge = ScriptedJudge([failure])
    result = await build_matcher(SPEC, registry_root=tmp_path, judges=judge)(case())
    assert (result.passed, result.score, result.reason) == (False, 0.0, "rate limited upstream")
    assert result.error_kind is ErrorKind.RATE_LIMITED
    assert result.judge is failure


def test_unknown_judge_service_fails_at_build(tmp_path: Path) -> None:
    judge = ScriptedJudge([], services=["judge-a", "judge-b"])
    with pytest.raises(EvalHydraError, match=r"Judge service 'judge' .* not configured") as info:
        build_matcher(SPEC, registry_root=tmp_path, judges=judge)
    assert "Available: judge-a, judge-b" in str(info.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pass_score": 1.5}, r"'pass_score' must be a number between 0 and 1, got 1\.5"),
        ({"pass_score": -0.1}, r"'pass_score' must be a number between 0 and 1"),
        ({"pass_score": True}, r"'pass_score' must be a number between 0 and 1"),
        ({"rubric": "  "}, r"'rubric' must be a non-blank string"),
        ({"judge_model": ""}, r"'judge_model' must be a non-blank string"),
        ({"rubric": None, "judge_service": "j"}, r"matcher kind 'model_grade' needs 'rubric'"),
        ({"prompt": "x.md"}, r"key 'prompt' is not allowed for matcher kind 'model_grade'"),
    ],
)
def test_model_grade_validation(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(EvalHydraError, match=message):
        validate_matcher({**SPEC, **change}, "m", registry_root=tmp_path)


def test_model_grade_defaults(tmp_path: Path) -> None:
    spec = {"kind": "model_grade", "judge_service": " judge ", "rubric": " R ", "judge_model": None}
    assert validate_matcher(spec, "m", registry_root=tmp_path) == {
        "kind": "model_grade",
        "judge_service": "judge",
        "rubric": "R",
        "pass_score": 1.0,
    }
