"""The matcher seam.

A matcher is an async callable ``(MatchContext) -> MatchResult``. Deterministic
matchers are plain functions wrapped by :func:`sync_matcher`; judges call a
service through the :class:`JudgeClient` the runner hands them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from evalhydra.core.values import (
    NO_CELL,
    CallContext,
    Case,
    ChatRequest,
    Completion,
    MatchResult,
    ToolCall,
    immutable,
)

__all__ = ["JudgeClient", "MatchContext", "Matcher", "SyncMatcher", "sync_matcher"]


@immutable
class MatchContext:
    """Everything a matcher may look at.

    Attributes:
        case: The dataset case (input, ideal, expected tool calls …).
        output: The candidate's text output ("" when it only called tools).
        tool_calls: The candidate's tool calls.
        trace: An agent's TrialTrace, when the service is an agent CLI.
        output_dir: An agent trial's working directory.
        log_content: An agent trial's combined stdout/stderr.
        reasoning: A reasoning model's thinking, taken out of ``output`` (judges are shown it
            only with ``include_reasoning``).
        trajectory: A tool loop's path: ``{"stop_reason", "turns", "tool_calls", "state",
            "transcript"}`` (:class:`evalhydra.execute.toolloop.LoopOutcome`), else None.
        call: The cell the output is scored for: a judge's call is made for it (its trial keys
            the response cache, its key names a batch line).
    """

    case: Case
    output: str
    tool_calls: tuple[ToolCall, ...] = ()
    trace: Any = None
    output_dir: Path | None = None
    log_content: str = ""
    reasoning: str | None = None
    trajectory: dict[str, Any] | None = None
    call: CallContext = NO_CELL


class JudgeClient(Protocol):
    """Lets a judge matcher call a configured service by name."""

    def service_names(self) -> list[str]:
        """Names of every service a judge may use."""
        ...

    async def judge(self, service_name: str, request: ChatRequest,
                    context: CallContext = NO_CELL) -> Completion:
        """Call ``service_name`` with ``request`` for ``context``'s cell (the output's:
        :attr:`MatchContext.call`); never raises for call errors."""
        ...

    async def embed(self, service_name: str, model: str,
                    texts: list[str]) -> tuple[list[list[float]] | None, Completion]:
        """Embed ``texts`` with ``service_name``'s embeddings endpoint: the vectors (None when the
        call failed) and the call's record (usage, latency, error); never raises for call errors."""
        ...


Matcher = Callable[[MatchContext], Awaitable[MatchResult]]


class SyncMatcher:
    """A pure, synchronous matching function as an async matcher; :attr:`fn` may be called
    directly by a caller that knows (:func:`evalhydra.matchers.factory.guard` does: a
    coroutine less per cell)."""

    __slots__ = ("fn", "__name__")

    def __init__(self, fn: Callable[[MatchContext], MatchResult]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "matcher")

    async def __call__(self, ctx: MatchContext) -> MatchResult:
        return self.fn(ctx)


def sync_matcher(fn: Callable[[MatchContext], MatchResult]) -> Matcher:
    """Wrap a pure, synchronous matching function as an async matcher."""
    return SyncMatcher(fn)
