"""Agent-CLI cells: run one trial in an isolated directory and turn it into a store row.

Agent trials live under ``<run.agent_trials_dir or store dir/agent_trials>/<service>/``
as ``<safe_model>/<case>/trial-<N>/`` (zrb's layout); the directory is wiped
before a cell runs again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalhydra.agents.executor import run_trial
from evalhydra.agents.loader import AgentCase
from evalhydra.execute.rows import agent_row
from evalhydra.plan.cells import CellJob
from evalhydra.plan.model import RunPlan
from evalhydra.services.base import EndpointReport
from evalhydra.store.rows import ResultRow
from evalhydra.telemetry.cells import baggage, traceparent

__all__ = ["AgentCellRunner", "agent_output_root"]

def agent_output_root(plan: RunPlan) -> Path:
    """Where this service's trial directories go."""
    configured = plan.run.agent_trials_dir
    base = Path(configured) if configured else plan.store_path.parent / "agent_trials"
    return base.expanduser().resolve() / plan.service.name


class AgentCellRunner:
    """Executes agent cells: one CLI trial each, scored by the case's validator."""

    def __init__(self, plan: RunPlan, run_id: str, *, traced: bool = False) -> None:
        self.plan = plan
        self.run_id = run_id
        self.traced = traced  # each trial's CLI gets its cell's TRACEPARENT (telemetry)
        self.root = agent_output_root(plan)

    def status(self) -> str:
        """Agent CLIs have no endpoint or batch to report on."""
        return ""

    def refused(self) -> list[EndpointReport]:
        """Agent CLIs have no endpoint to refuse requests."""
        return []

    async def run(self, job: CellJob) -> tuple[ResultRow, list[dict[str, Any]]]:
        """Run one agent trial; return its result row (no HTTP attempts to record)."""
        case: AgentCase = job.case
        trace = (traceparent(self.run_id, job.key), baggage(self.run_id, case.id, job.trial))
        trial = await run_trial(case, self.plan.service, job.model or self.plan.model, job.trial, self.root,
                                trace=trace if self.traced else None)
        return agent_row(trial, case, job, self.run_id, self.plan.service.name), []
