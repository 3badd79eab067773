"""The seam between the runner and whatever answers a case.

A :class:`Service` turns a :class:`~evalhydra.core.values.ChatRequest` into a
:class:`~evalhydra.core.values.Completion`, told whom the call is for by a
:class:`~evalhydra.core.values.CallContext` (the cell, its trial, whether the response cache may
answer): everything a call needs travels with it, never in ambient variables. It never raises for
a per-call problem (HTTP error, timeout, bad body): those become a Completion with ``error_kind``
set, so one failure never cancels its siblings. A service that also embeds texts is an
:class:`Embedder`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import NO_CELL, CallContext, ChatRequest, Completion

__all__ = ["Embedder", "EndpointReport", "Reporting", "RunServices", "Service"]


@dataclass(frozen=True, slots=True)
class EndpointReport:
    """How an endpoint's limits went in a run (for the summary)."""

    endpoint: str
    limit: int
    lowest: int
    ceiling: int
    refusals: int
    pace: float = 0.0  # requests a second at the end (0: not paced)


@runtime_checkable
class Service(Protocol):
    """An open service, created inside the run's trio loop and closed after it."""

    config: ServiceConfig

    @property
    def name(self) -> str:
        """The service's name (``ServiceConfig.name``)."""
        ...

    async def complete(self, request: ChatRequest, context: CallContext = NO_CELL) -> Completion:
        """Send one request (with retries) for ``context``'s cell and return its outcome; never raises."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """A service with an embeddings endpoint (graders that compare texts by meaning use it)."""

    async def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]] | None, Completion]:
        """The texts' vectors (None when the call failed) and the call's completion; never raises."""
        ...


@runtime_checkable
class Reporting(Protocol):
    """A service that says how its endpoints and batches are doing (the progress line's note)."""

    def status(self) -> str:
        """Its note, parts joined by `` · `` ("" with nothing to say)."""
        ...


class RunServices(Protocol):
    """A run's open services, as the run asks them how they are doing."""

    def status(self) -> str:
        """The progress line's note on their endpoints and batches ("" with nothing to say)."""
        ...

    def refused(self) -> list[EndpointReport]:
        """Their endpoints that refused requests (429), for the summary."""
        ...
