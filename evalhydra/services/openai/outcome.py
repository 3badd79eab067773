"""A call's outcome as a :class:`~evalhydra.core.values.Completion`: the last attempt's answer
(priced, its stream timing rounded as stored) or its error; a reply's budget headers; the
invalid-reply and failed-call shapes the service returns."""

from __future__ import annotations

from evalhydra.config.schema import PricingConfig
from evalhydra.core.values import Completion, ErrorKind
from evalhydra.services.openai.response import ChatAnswer
from evalhydra.services.openai.stream import StreamTiming
from evalhydra.services.pricing import cost_usd
from evalhydra.services.retry import AttemptResult, RetryOutcome

__all__ = ["completion_of", "failed_completion", "invalid_reply", "limit_headers"]


def completion_of(outcome: RetryOutcome[ChatAnswer], model: str, waited_ms: float,
                  pricing: PricingConfig) -> Completion:
    """A call's completion from its attempts: the last one's answer (priced), or its error."""
    last, n = outcome.last, len(outcome.attempts)
    answer = last.value
    if answer is None or last.error_kind is not None:
        return Completion(
            output="",
            model=model,
            status_code=last.status_code,
            attempt_count=n,
            retried=n > 1,
            latency_ms=outcome.latency_ms,
            waited_ms=waited_ms,
            error_kind=last.error_kind,
            error_message=last.error_message,
            attempts=tuple(outcome.attempts),
        )
    timing = _rounded_timing(answer.timing)
    return Completion(
        output=answer.output,
        model=answer.model,
        tool_calls=answer.tool_calls,
        usage=answer.usage,
        status_code=last.status_code,
        attempt_count=n,
        retried=n > 1,
        latency_ms=outcome.latency_ms,
        waited_ms=waited_ms,
        attempts=tuple(outcome.attempts),
        cost_usd=cost_usd(answer.usage, pricing),
        reasoning=answer.reasoning,
        reasoning_finished=answer.reasoning_finished,
        ttft_ms=timing.ttft_ms,
        first_answer_ms=timing.first_answer_ms,
        output_tps=timing.output_tps,
        finish_reason=answer.finish_reason,
        response_id=answer.response_id,
        wire=answer.wire,
    )


def limit_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str] | None:
    """A reply's budget headers, ``x-ratelimit-*`` and ``anthropic-ratelimit-*`` (names
    lower-cased), or None without any."""
    found = None
    for name, value in raw:
        if name[:12].lower() == b"x-ratelimit-" or name[:20].lower() == b"anthropic-ratelimit-":
            found = found or {}
            found[name.decode("latin-1").lower()] = value.decode("latin-1")
    return found


_WHOLE_REPLY = StreamTiming()  # a whole reply's timing: none


def _rounded_timing(timing: StreamTiming | None) -> StreamTiming:
    """A streamed answer's timing rounded as the store keeps it; all None for a whole reply."""
    if timing is None:
        return _WHOLE_REPLY
    return StreamTiming(_rounded(timing.ttft_ms, 1), _rounded(timing.first_answer_ms, 1),
                        _rounded(timing.output_tps, 2))


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def invalid_reply(status: int, reason: str) -> AttemptResult[ChatAnswer]:
    return AttemptResult(status_code=status, error_kind=ErrorKind.INVALID_RESPONSE, error_message=reason)


def failed_completion(model: str, kind: ErrorKind, message: str, attempts: int) -> Completion:
    return Completion(output="", model=model, attempt_count=attempts, error_kind=kind, error_message=message)
