"""Test helpers: a scripted :class:`~evalhydra.matchers.base.JudgeClient`.

Like ``trio.testing``, this ships with the package so tests of the runner and
of the matchers can share one fake judge.
"""

from __future__ import annotations

from collections.abc import Iterable

from evalhydra.core.values import NO_CELL, CallContext, ChatRequest, Completion, ErrorKind

__all__ = ["ScriptedJudge", "judge_error", "judge_reply"]


def judge_reply(content: str, *, model: str = "judge-model", attempts: int = 1) -> Completion:
    """A successful judge completion whose text is ``content``."""
    return Completion(
        output=content,
        model=model,
        status_code=200,
        attempt_count=attempts,
        retried=attempts > 1,
    )


def judge_error(
    message: str = "UpstreamHttpError",
    kind: ErrorKind = ErrorKind.SERVER_ERROR,
    status_code: int | None = 500,
) -> Completion:
    """A failed judge completion."""
    return Completion(
        output="",
        model="judge-model",
        status_code=status_code,
        error_kind=kind,
        error_message=message,
    )


class ScriptedJudge:
    """Answers judge calls with scripted completions, recording every request.

    Args:
        replies: Completions (or plain strings, wrapped by :func:`judge_reply`)
            returned in order; the last one repeats when the script runs out.
        services: The judge service names it claims to serve.
    """

    def __init__(self, replies: Iterable[Completion | str], services: Iterable[str] = ("judge",)) -> None:
        self.replies = [judge_reply(r) if isinstance(r, str) else r for r in replies]
        self.services = list(services)
        self.calls: list[tuple[str, ChatRequest]] = []

    def service_names(self) -> list[str]:
        """The configured judge names."""
        return list(self.services)

    async def embed(self, service_name: str, model: str,
                    texts: list[str]) -> tuple[list[list[float]] | None, Completion]:
        """Scripted judges embed nothing: the call fails, as a service without the endpoint does."""
        return None, Completion(output="", model=model, error_kind=ErrorKind.CLIENT_ERROR,
                                error_message="a scripted judge has no embeddings endpoint")

    async def judge(self, service_name: str, request: ChatRequest,
                    context: CallContext = NO_CELL) -> Completion:
        """Record the call and return the next scripted completion."""
        del context
        self.calls.append((service_name, request))
        index = min(len(self.calls), len(self.replies)) - 1
        return self.replies[index]
