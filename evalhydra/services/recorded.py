"""The ``recorded`` service: a case's stored sample is its answer, so outputs produced elsewhere are
graded without sampling again.

An OpenAI Evals ``jsonl`` run (rows ``{"item", "sample"}``), or an import's ``--data`` file whose
rows carry a ``sample``, holds each item's output already. Its dataset lines keep the sample,
and a run with ``service=recorded`` answers each case from it: ``output_text`` (or the first
choice's message, or the first output's content) is the output, ``output_tools`` the tool
calls, ``model`` the model and ``usage`` the tokens (``prompt_tokens`` / ``completion_tokens``, or
the Responses API's ``input_tokens`` / ``output_tokens``). Nothing is sent; a case without a sample
is an ``invalid_response`` error naming it.
"""

from __future__ import annotations

from typing import Any

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import NO_CELL, CallContext, ChatRequest, Completion, ErrorKind, ToolCall, Usage
from evalhydra.services.openai.response import InvalidResponseError, parse_usage
from evalhydra.services.responses_api import chat_usage

__all__ = ["RecordedService"]


class RecordedService:
    """Answers each case from its recorded sample (see the module).

    Args:
        config: The service (``kind: recorded``).
    """

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config

    @property
    def name(self) -> str:
        """The service's name."""
        return self.config.name

    async def complete(self, request: ChatRequest, context: CallContext = NO_CELL) -> Completion:
        """The completion the request's case's sample records (an error naming the case without one)."""
        del context  # nothing is sent
        model = self.config.model or self.config.default_model
        sample, case = request.sample, request.case_id
        if not isinstance(sample, dict):
            return _failed(model, f"case '{case}' has no recorded sample to grade" if case
                           else "the recorded service answers cases from their samples only")
        output = _output_text(sample)
        if output is None:
            return _failed(model, f"case '{case}': its sample records no output text")
        try:
            usage = _usage(sample.get("usage"))
        except InvalidResponseError as exc:
            return _failed(model, f"case '{case}': {exc.args[0]}")
        recorded = sample.get("model")
        return Completion(output=output, model=recorded if isinstance(recorded, str) and recorded else model,
                          tool_calls=_tool_calls(sample), usage=usage, status_code=200)

    async def aclose(self) -> None:
        """Nothing to close."""


def _output_text(sample: dict[str, Any]) -> str | None:
    if isinstance(sample.get("output_text"), str):
        return str(sample["output_text"])
    choices = sample.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return str(message["content"])
    output = sample.get("output")
    if isinstance(output, list) and output and isinstance(output[0], dict):
        content = output[0].get("content")
        return content if isinstance(content, str) else None
    return None


def _tool_calls(sample: dict[str, Any]) -> tuple[ToolCall, ...]:
    calls = []
    for call in sample.get("output_tools") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            arguments = function.get("arguments")
            calls.append(ToolCall(function["name"], arguments if isinstance(arguments, str) else "{}"))
    return tuple(calls)


def _usage(usage: Any) -> Usage:
    """A sample's usage, in chat's names or the Responses API's, read as a reply's is.

    Raises:
        InvalidResponseError: A count past any real one.
    """
    if isinstance(usage, dict) and "input_tokens" in usage:
        usage = chat_usage(usage)
    return parse_usage({"usage": usage})


def _failed(model: str, message: str) -> Completion:
    return Completion(output="", model=model, error_kind=ErrorKind.INVALID_RESPONSE, error_message=message)
