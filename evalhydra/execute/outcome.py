"""What a run did: the counts and reasons the summary and the exit code read."""

from __future__ import annotations

from dataclasses import dataclass, field

from evalhydra.services.base import EndpointReport

__all__ = ["RunOutcome"]


@dataclass
class RunOutcome:
    """What happened, for the summary and the exit code."""

    run_id: str
    total: int = 0
    skipped: int = 0
    executed: int = 0
    errors: int = 0
    cost_usd: float = 0.0
    interrupted: bool = False
    budget_exhausted: bool = False
    dead_endpoint: str | None = None  # why the run stopped sending (see DeadEndpointWatch)
    held_elsewhere: int = 0  # pending cells another live run had claimed, so this one left them
    holders: set[str] = field(default_factory=set)
    rate_limited: list[EndpointReport] = field(default_factory=list)  # endpoints that refused (429)
    deferred: int = 0  # cells whose batch is still pending at the provider: not stored, a rerun collects them
    deferred_reason: str = ""
