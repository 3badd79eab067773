"""The ``rubric`` matcher: aiwg's isolated evaluator.

Config: ``{kind: rubric, judge_service, judge_model?, prompt, weights?,
pass_threshold: 0.85}``. ``prompt`` is a registry-relative prompt file (see
:mod:`evalhydra.matchers.prompts`); its ``## System`` section becomes the
judge's system prompt and its ``## User`` section, with ``{{input}}`` (the
case's original input, non-strings JSON-dumped) and ``{{output}}`` (the
candidate's text as-is) substituted, the user message. ``max_tokens`` and
``temperature`` from the front matter are sent as request params; its
``model`` is ignored (``judge_model`` or the judge's default is used).
The case's ``expected`` never reaches the evaluator.

Scoring is computed, never trusted: with ``weights`` the score is the weighted
mean of ``rubric_scores`` over the weighted criteria (a criterion missing from
the reply counts 0); without, it is the reply's ``score`` (or, if absent, the
plain mean of ``rubric_scores``). The case passes when ``score >=
pass_threshold``; the reply's own ``pass`` is only recorded in ``details``.
On a pass ``feedback`` is "" and ``failure_category``/``suggested_fix`` are
None. On a failure the category must be one of :data:`FAILURE_CATEGORIES`
(anything else becomes ``other``). A reply that is not a JSON object with the
needed numbers fails with ``invalid evaluator output`` and error kind
``INVALID_RESPONSE``: the evaluator, not the candidate, is at fault.

The refinement loop lives in the runner; :func:`refinement_input` builds the
generator's next input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import ChatRequest, Completion, MatchResult
from evalhydra.matchers.base import JudgeClient, MatchContext, Matcher
from evalhydra.matchers.common import format_value, is_unit_number, strict_json_loads, strip_code_fence
from evalhydra.matchers.judging import invalid_judge_output, judge_call_failed, judged_output, require_judge
from evalhydra.matchers.paths import resolve_registry_path
from evalhydra.matchers.prompts import PromptFile, load_evaluator_prompt

__all__ = [
    "DEFAULT_PASS_THRESHOLD",
    "FAILURE_CATEGORIES",
    "INVALID_EVALUATOR_OUTPUT",
    "build_rubric",
    "check_rubric",
    "evaluate_reply",
    "load_rubric_prompt",
    "parse_evaluator_reply",
    "refinement_input",
    "rubric_request",
    "rubric_result",
    "rubric_score",
]

DEFAULT_PASS_THRESHOLD = 0.85
INVALID_EVALUATOR_OUTPUT = "invalid evaluator output"
FAILURE_CATEGORIES = frozenset(
    {"format", "content", "hallucination", "missing_field", "constraint_violation", "other"}
)
_REQUEST_PARAMS = ("max_tokens", "temperature")


def refinement_input(feedback: str, original_input: str) -> str:
    """The generator's next input after a failed attempt (aiwg's exact wording)."""
    return f"Previous attempt was insufficient. Feedback: {feedback}\n\nOriginal request: {original_input}"


def parse_evaluator_reply(text: str) -> dict[str, Any] | None:
    """Parse an evaluator reply (fence-stripped JSON object), or None when unparseable."""
    try:
        reply = strict_json_loads(strip_code_fence(text))
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


def _criteria(reply: Mapping[str, Any]) -> dict[str, float] | None:
    raw = reply.get("rubric_scores")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        return None
    if not all(is_unit_number(v) for v in raw.values()):
        return None
    return {str(k): float(v) for k, v in raw.items()}


def rubric_score(
    reply: Mapping[str, Any], weights: Mapping[str, float] | None
) -> tuple[float, dict[str, float]] | None:
    """Compute ``(score, rubric_scores)`` from a parsed reply, or None when invalid.

    With weights: the weighted mean over the weighted criteria (missing → 0).
    Without: the reply's ``score``, else the mean of ``rubric_scores``.
    """
    criteria = _criteria(reply)
    if criteria is None:
        return None
    if weights:
        if "rubric_scores" not in reply:
            return None
        total = sum(weights.values())
        score = sum(w * criteria.get(name, 0.0) for name, w in weights.items()) / total
    elif is_unit_number(reply.get("score")):
        score = float(reply["score"])
    elif criteria:
        score = sum(criteria.values()) / len(criteria)
    else:
        return None
    return min(1.0, max(0.0, round(score, 10))), criteria


def _text_or_none(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else format_value(value)
    return text.strip() or None


def evaluate_reply(
    reply: Mapping[str, Any], weights: Mapping[str, float] | None, pass_threshold: float
) -> MatchResult | None:
    """Score a parsed evaluator reply; None when it lacks the needed numbers."""
    scored = rubric_score(reply, weights)
    if scored is None:
        return None
    score, criteria = scored
    details = {
        "evaluator_score": reply.get("score"),
        "evaluator_pass": reply.get("pass"),
        "pass_threshold": pass_threshold,
    }
    if score >= pass_threshold:
        return MatchResult(passed=True, score=score, details=details, feedback="", rubric_scores=criteria)
    feedback = _text_or_none(reply.get("feedback")) or ""
    category = reply.get("failure_category")
    return MatchResult(
        passed=False,
        score=score,
        reason=feedback or f"score {score:.3f} below pass threshold {pass_threshold:.3f}",
        details=details,
        feedback=feedback,
        rubric_scores=criteria,
        failure_category=category if category in FAILURE_CATEGORIES else "other",
        suggested_fix=_text_or_none(reply.get("suggested_fix")),
    )


def rubric_result(
    completion: Completion, weights: Mapping[str, float] | None, pass_threshold: float
) -> MatchResult:
    """Turn the evaluator call's outcome into a match result (judge attached)."""
    if not completion.ok:
        return judge_call_failed(completion)
    reply = parse_evaluator_reply(completion.output)
    result = None if reply is None else evaluate_reply(reply, weights, pass_threshold)
    if result is None:
        return invalid_judge_output(completion, INVALID_EVALUATOR_OUTPUT)
    return dataclasses.replace(result, judge=completion)


def rubric_request(prompt: PromptFile, ctx: MatchContext, model: str | None,
                   include_reasoning: bool = False, include_transcript: bool = False) -> ChatRequest:
    """Build the evaluator request: only the original input and the output are sent (and the
    candidate's thinking with ``include_reasoning``, a tool loop's conversation with
    ``include_transcript``)."""
    output = judged_output(ctx, include_reasoning, include_transcript)
    system, user = prompt.render({"input": format_value(ctx.case.input), "output": output})
    params = {k: prompt.front_matter[k] for k in _REQUEST_PARAMS if k in prompt.front_matter}
    return ChatRequest(user_content=user, model=model, system_prompt=system, params=params or None)


def load_rubric_prompt(spec: Mapping[str, Any], root: Path, where: str) -> PromptFile:
    """Resolve, read and isolation-check the rubric's prompt file.

    Raises:
        EvalHydraError: Unsafe or missing path, unparseable or contaminated prompt.
    """
    rel = spec["prompt"]
    path = resolve_registry_path(root, rel, where=where, what="rubric prompt")
    return load_evaluator_prompt(path, rel)


def check_rubric(spec: Mapping[str, Any], root: Path, where: str) -> None:
    """Load-time checks: the prompt file is safe and isolated, the weights sum above 0.

    Raises:
        EvalHydraError: Naming the problem.
    """
    load_rubric_prompt(spec, root, where)
    weights = spec.get("weights")
    if weights is not None and sum(weights.values()) <= 0:
        raise EvalHydraError(f"{where}: rubric 'weights' must have a positive sum")


def build_rubric(
    spec: Mapping[str, Any], root: Path, judges: JudgeClient | None, where: str = "matcher"
) -> Matcher:
    """Build a ``rubric`` matcher from a cleaned spec."""
    service = spec["judge_service"]
    client = require_judge(judges, service, "rubric")
    prompt = load_rubric_prompt(spec, root, where)
    model, weights = spec.get("judge_model"), spec.get("weights")
    threshold = float(spec.get("pass_threshold", DEFAULT_PASS_THRESHOLD))
    thinking, transcript = bool(spec.get("include_reasoning")), bool(spec.get("include_transcript"))

    async def match(ctx: MatchContext) -> MatchResult:
        request = rubric_request(prompt, ctx, model, thinking, transcript)
        completion = await client.judge(service, request, ctx.call)
        return rubric_result(completion, weights, threshold)

    return match
