"""What the response cache keeps of an answer, and the answer read back: a JSON-ready record of
the output, model, tool calls (arguments as sent), usage, thinking and stream timing, checked on
the way back in (a damaged or edited entry is a miss)."""

from __future__ import annotations

from typing import Any

from evalhydra.core.values import MAX_TOKEN_COUNT, Completion, ToolCall, Usage

__all__ = ["answer_record", "completion_from_record"]


def answer_record(completion: Completion) -> dict[str, Any]:
    """What the response cache keeps of an answer (JSON-ready)."""
    usage = completion.usage
    return {"output": completion.output, "model": completion.model,
            "tool_calls": [[call.name, call.arguments, *([True] if call.arguments_object else [])]
                           for call in completion.tool_calls],
            "usage": [usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens,
                      usage.reasoning_tokens, usage.reported],
            "reasoning": completion.reasoning, "reasoning_finished": completion.reasoning_finished,
            "timing": [completion.ttft_ms, completion.first_answer_ms, completion.output_tps],
            "finish_reason": completion.finish_reason, "response_id": completion.response_id}


def completion_from_record(record: dict[str, Any]) -> Completion:
    """The completion :func:`answer_record` kept.

    Raises:
        KeyError, TypeError, ValueError: A record of another shape (a cache file edited or damaged).
    """
    prompt, output, cached, thinking, reported = record["usage"]
    ttft, first_answer, tps = record["timing"]
    counts_ok = all(type(n) is int and 0 <= n <= MAX_TOKEN_COUNT for n in (prompt, output, cached, thinking))
    texts_ok = isinstance(record["output"], str) and isinstance(record["model"], str) and all(
        isinstance(call[0], str) and isinstance(call[1], str) and call[2:] in ([], [True])
        for call in record["tool_calls"])
    thinking_ok = record["reasoning"] is None or isinstance(record["reasoning"], str)
    if not (counts_ok and texts_ok and thinking_ok):
        raise TypeError("not an answer record")
    return Completion(output=record["output"], model=record["model"],
                      tool_calls=tuple(ToolCall(call[0], call[1], None, len(call) > 2)
                                       for call in record["tool_calls"]),
                      usage=Usage(prompt, output, cached, thinking, bool(reported)),
                      reasoning=record["reasoning"],
                      reasoning_finished=bool(record["reasoning_finished"]), ttft_ms=ttft,
                      first_answer_ms=first_answer, output_tps=tps,
                      finish_reason=_optional_text(record.get("finish_reason")),
                      response_id=_optional_text(record.get("response_id")))


def _optional_text(value: Any) -> str | None:
    """A record's finish reason or reply id (entries written before they were kept have none)."""
    return value if isinstance(value, str) else None
