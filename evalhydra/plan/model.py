"""The frozen plan of a run: what runs, against what, stored where."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalhydra.config.schema import RunConfig, ServiceConfig, TelemetryConfig
from evalhydra.core.values import ToolSpec
from evalhydra.plan.selection import CaseSelection
from evalhydra.plan.tools import LoopPlan
from evalhydra.plan.users import UserPlan
from evalhydra.registry.datasets import CaseTemplate

__all__ = ["EvalPlan", "RunPlan"]


@dataclass(frozen=True)
class EvalPlan:
    """One eval as it will run."""

    id: str
    group: str
    description: str
    dataset_path: str | None
    split: str
    matcher: dict[str, Any]
    trials: int
    tools: tuple[ToolSpec, ...]
    refinement_attempts: int  # the aiwg refinement loop (eval ``max_attempts``), not HTTP retries
    cases: Any = None
    template: CaseTemplate = field(default_factory=CaseTemplate)  # prompt or messages, filled per case
    params: dict[str, Any] = field(default_factory=dict)  # generation parameters, over the service's
    result_hash: str = ""  # hash of result-relevant settings (part of every cell key)
    base_dir: Path | None = None  # the folder of the eval's own-format file: its paths resolve there first
    loop: LoopPlan | None = None  # a tool loop: the tools that run, and its limits
    wire: str = ""  # "zig_eval": replies are read as zig_eval reads them (a zig_eval-layout registry)
    user: UserPlan | None = None  # a simulated user: each cell is a conversation with it


@dataclass(frozen=True)
class CachePlan:
    """The response cache of a run: its file, how long entries count, whether judges use it."""

    path: Path
    expiry_s: float
    judge: bool = True


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs, validated and frozen."""

    service: ServiceConfig
    model: str
    evals: tuple[EvalPlan, ...]
    judges: dict[str, ServiceConfig]  # every other service the run calls: judges, simulated users
    registry_root: Path
    run: RunConfig
    store_path: Path
    fingerprint: str
    config: dict[str, Any]
    overrides: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # evals left out by their service_allowlist
    sweep_dir: str | None = None  # the multirun sweep directory this job belongs to
    job_num: int | None = None  # its job number in that sweep
    models: tuple[str, ...] = ()  # agent CLIs: every model of the run (``service.models``); else (model,)
    cache: CachePlan | None = None  # the response cache (``cache.enabled``)
    selection: CaseSelection = field(default_factory=CaseSelection)  # run.limit, run.cases, …
    telemetry: TelemetryConfig | None = None  # spans out (``telemetry.export``); None: off
    url_origin: str = ""  # where service.base_url came from (:func:`~evalhydra.core.envfiles.value_origin`)

    @property
    def run_models(self) -> tuple[str, ...]:
        """The models whose cells this run holds: ``models``, or just ``model``."""
        return self.models or (self.model,)

    @property
    def resend_errors(self) -> bool:
        """Whether stored infrastructure errors are sent again: ``run.retry_errors`` when set,
        else yes for chat services and no for agent CLIs (zrb keeps ERROR/TIMEOUT trials)."""
        if self.run.retry_errors is not None:
            return bool(self.run.retry_errors)
        return self.service.kind != "command"

    @property
    def fresh(self) -> bool:
        """Whether every selected cell is sent again, stored or not: ``run.fresh``, and the cases
        ``run.rerun=failed`` chose (asking again is why they were chosen)."""
        return bool(self.run.fresh) or self.selection.rerun == "failed"

    @property
    def resend_client_errors(self) -> bool:
        """Whether stored 4xx replies (but 408, 409 and 429) are sent again too: they cannot
        succeed as they are (a context too long, a bad parameter), so only ``run.retry_errors=all``."""
        return self.run.retry_errors == "all"
