"""What model-judged matchers share: judge failures and merged judge calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.core.values import Completion, ErrorKind, MatchResult, Usage
from evalhydra.matchers.base import JudgeClient, MatchContext

__all__ = [
    "judged_output","invalid_judge_output", "judge_call_failed", "merge_judges", "require_judge"]


def require_judge(judges: JudgeClient | None, service: str, kind: str) -> JudgeClient:
    """Return the judge client after checking it knows ``service``.

    Raises:
        ValueError: No judge client was given (a programming error).
        EvalHydraError: The judge service is not configured.
    """
    if judges is None:
        raise ValueError(f"a {kind} matcher needs a JudgeClient")
    names = judges.service_names()
    if service not in names:
        raise EvalHydraError(
            f"Judge service '{service}' of a {kind} matcher is not configured",
            did_you_mean(service, names),
        )
    return judges


def judge_call_failed(completion: Completion) -> MatchResult:
    """The result when the judge call itself failed: score 0, the judge's reason.

    The judge's ``error_kind`` is kept, so the result counts as an
    infrastructure error, not as a wrong answer.
    """
    reason = completion.error_message or str(completion.error_kind)
    return MatchResult(
        passed=False,
        score=0.0,
        reason=reason,
        judge=completion,
        error_kind=completion.error_kind,
    )


def invalid_judge_output(completion: Completion, reason: str) -> MatchResult:
    """The result when the judge answered but not in the required shape.

    It is the judge's fault, not the candidate's: ``error_kind`` is
    ``INVALID_RESPONSE`` so the result is reported (and retried) as an error.
    """
    return MatchResult(
        passed=False,
        score=0.0,
        reason=reason,
        judge=completion,
        error_kind=ErrorKind.INVALID_RESPONSE,
    )


def merge_judges(completions: Sequence[Completion]) -> Completion | None:
    """Fold several judge calls into one record (for composite matchers).

    Usage, attempts, latency and cost are summed; ``retried`` is true when any
    call retried; status, output and model come from the last call; the first
    error (if any) is kept. One call is returned unchanged; none gives None.
    """
    if len(completions) <= 1:
        return completions[0] if completions else None
    usage = Usage()
    for completion in completions:
        usage = usage + completion.usage
    failed = [c for c in completions if c.error_kind is not None]
    last = completions[-1]
    return Completion(
        output=last.output,
        model=last.model,
        usage=usage,
        status_code=last.status_code,
        attempt_count=sum(c.attempt_count for c in completions),
        retried=any(c.retried for c in completions),
        latency_ms=sum(c.latency_ms for c in completions),
        error_kind=failed[0].error_kind if failed else None,
        error_message=failed[0].error_message if failed else None,
        attempts=tuple(a for c in completions for a in c.attempts),
        cost_usd=sum(c.cost_usd for c in completions),
    )


def judged_output(ctx: MatchContext, include_reasoning: bool, include_transcript: bool = False) -> str:
    """What a judge is shown as the candidate's output: the answer; with ``include_reasoning`` the
    thinking before it (when the reply had any); with ``include_transcript`` a tool loop's
    conversation before it (its calls and their results)."""
    output = ctx.output
    if include_reasoning and ctx.reasoning:
        output = f"[The candidate's reasoning, before its answer]\n{ctx.reasoning}\n\n[Its answer]\n{output}"
    transcript = (ctx.trajectory or {}).get("transcript") if include_transcript else None
    if transcript:
        heading = "[The conversation: the candidate's tool calls and their results]"
        output = f"{heading}\n{_transcript_text(transcript)}\n\n[Its final answer]\n{output}"
    return output


def _transcript_text(messages: list[Any]) -> str:
    """A tool loop's messages as plain lines a judge reads (the first user message left out: the
    judge is shown the input apart)."""
    lines = []
    for message in messages[1:]:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if message.get("content"):
            lines.append(f"{role}: {message['content']}")
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(f"{role} calls {function.get('name')}({function.get('arguments')})")
    return "\n".join(lines)
