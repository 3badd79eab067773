"""The seam between the runner and whatever answers a case.

A :class:`Service` turns a :class:`~evalhydra.core.values.ChatRequest` into a
:class:`~evalhydra.core.values.Completion`. It never raises for a per-call problem
(HTTP error, timeout, bad body): those become a Completion with ``error_kind``
set, so one failure never cancels its siblings.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import ChatRequest, Completion

__all__ = ["Service"]


@runtime_checkable
class Service(Protocol):
    """An open service, created inside the run's trio loop and closed after it."""

    config: ServiceConfig

    @property
    def name(self) -> str:
        """The service's name (``ServiceConfig.name``)."""
        ...

    async def complete(self, request: ChatRequest) -> Completion:
        """Send one request (with retries) and return its outcome; never raises."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
