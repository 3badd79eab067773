"""The ``model_grade`` matcher (zig_eval): an LLM judge with a rubric.

The judge gets zig_eval's prompt byte for byte (:func:`model_grade_prompt`) as
the user message, with the judge service's own system prompt and
``judge_model`` (or the judge's default model). Its whole reply must be a JSON
object ``{"score": 0..1, "passed": bool, "reason": non-blank}``; anything else
fails with ``InvalidModelGradeJudgeOutput``. The case passes when the judge
says ``passed`` **and** ``score >= pass_score`` (default 1.0). The judge's
score is kept on failure and its reason becomes the failure reason.
"""

from __future__ import annotations

from typing import Any

from evalhydra.core import strictjson
from evalhydra.core.values import ChatRequest, Completion, MatchResult
from evalhydra.core.zig_numbers import fixed
from evalhydra.matchers.base import JudgeClient, MatchContext, Matcher
from evalhydra.matchers.common import (
    ASCII_WHITESPACE,
    effective_ideal,
    format_value,
    is_unit_number,
)
from evalhydra.matchers.judging import invalid_judge_output, judge_call_failed, judged_output, require_judge

__all__ = [
    "INVALID_JUDGE_OUTPUT",
    "build_model_grade",
    "model_grade_prompt",
    "parse_judge_reply",
    "grade_reply",
]

INVALID_JUDGE_OUTPUT = "InvalidModelGradeJudgeOutput"
NO_IDEAL = "No ideal answer was provided."


def model_grade_prompt(
    rubric: str, pass_score: float, input_text: str, output: str, ideal: str | None
) -> str:
    """Render zig_eval's judge prompt, byte for byte.

    Args:
        rubric: The grading rubric.
        pass_score: The passing score, printed with 3 decimals.
        input_text: The eval input (non-strings should be JSON-dumped first).
        output: The candidate output.
        ideal: The ideal answer, or None (then ``No ideal answer was provided.``).

    Returns:
        The prompt, ending with a newline.
    """
    return (
        "You are grading an LLM or product response for an eval.\n"
        "\n"
        f"Rubric:\n{rubric}\n"
        "\n"
        f"Passing score:\n{fixed(pass_score, 3)}\n"
        "\n"
        f"Eval input:\n{input_text}\n"
        "\n"
        f"Candidate output:\n{output}\n"
        "\n"
        f"Ideal answer:\n{NO_IDEAL if ideal is None else ideal}\n"
        "\n"
        "Return JSON only with this exact shape:\n"
        '{"score":0.0,"passed":false,"reason":"short explanation"}\n'
        "\n"
        "Score must be between 0 and 1. Set passed to true only when score is greater than"
        " or equal to the passing score.\n"
    )


def parse_judge_reply(content: str) -> tuple[float, bool, str] | None:
    """Strictly parse a judge reply into ``(score, passed, reason)``, or None.

    The whole content must be a JSON object with a numeric ``score`` in [0, 1]
    (a bool is not a number), a bool ``passed`` and a non-blank string
    ``reason`` (returned trimmed).
    """
    try:
        reply = strictjson.loads(content)
    except ValueError:
        return None
    if not isinstance(reply, dict):
        return None
    score, verdict, reason = reply.get("score"), reply.get("passed"), reply.get("reason")
    if not is_unit_number(score) or not isinstance(verdict, bool):
        return None
    if not isinstance(reason, str) or not reason.strip(ASCII_WHITESPACE):
        return None
    return float(score), verdict, reason.strip(ASCII_WHITESPACE)


def grade_reply(completion: Completion, pass_score: float) -> MatchResult:
    """Turn the judge call's outcome into a match result.

    A failed call gives score 0, the judge's error message and its error kind;
    an invalid reply gives ``InvalidModelGradeJudgeOutput``. The completion is
    always attached as ``judge``.
    """
    if not completion.ok:
        return judge_call_failed(completion)
    parsed = parse_judge_reply(completion.output)
    if parsed is None:
        return invalid_judge_output(completion, INVALID_JUDGE_OUTPUT)
    score, verdict, reason = parsed
    ok = verdict and score >= pass_score
    details = {"judge_passed": verdict, "judge_reason": reason}
    return MatchResult(
        passed=ok, score=score, reason=None if ok else reason, details=details, judge=completion
    )


def build_model_grade(spec: dict[str, Any], judges: JudgeClient | None) -> Matcher:
    """Build a ``model_grade`` matcher from a cleaned spec."""
    service = spec["judge_service"]
    client = require_judge(judges, service, "model_grade")
    rubric, model = spec["rubric"], spec.get("judge_model")
    pass_score = float(spec.get("pass_score", 1.0))
    thinking, transcript = bool(spec.get("include_reasoning")), bool(spec.get("include_transcript"))

    async def match(ctx: MatchContext) -> MatchResult:
        prompt = model_grade_prompt(
            rubric,
            pass_score,
            format_value(ctx.case.input),
            judged_output(ctx, thinking, transcript),
            effective_ideal(ctx.case.ideal),
        )
        request = ChatRequest(user_content=prompt, model=model, system_prompt=None)
        return grade_reply(await client.judge(service, request, ctx.call), pass_score)

    return match
