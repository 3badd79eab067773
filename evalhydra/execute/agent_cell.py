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
from evalhydra.agents.models import TrialResult
from evalhydra.plan.cells import CellJob
from evalhydra.plan.model import RunPlan
from evalhydra.store.rows import ResultRow, now_iso

__all__ = ["AgentCellRunner", "agent_output_root", "row_from_trial"]

PASSING = ("EXCELLENT", "PASS")
ERROR_KINDS = {"TIMEOUT": "timeout", "ERROR": "agent_error"}


def agent_output_root(plan: RunPlan) -> Path:
    """Where this service's trial directories go."""
    configured = plan.run.agent_trials_dir
    base = Path(configured) if configured else plan.store_path.parent / "agent_trials"
    return base.expanduser().resolve() / plan.service.name


class AgentCellRunner:
    """Executes agent cells: one CLI trial each, scored by the case's validator."""

    def __init__(self, plan: RunPlan, run_id: str) -> None:
        self.plan = plan
        self.run_id = run_id
        self.root = agent_output_root(plan)

    async def run(self, job: CellJob) -> tuple[ResultRow, list[dict[str, Any]]]:
        """Run one agent trial; return its result row (no HTTP attempts to record)."""
        case: AgentCase = job.case
        trial = await run_trial(case, self.plan.service, job.model or self.plan.model, job.trial, self.root)
        return row_from_trial(trial, case, job, self.run_id, self.plan.service.name), []


def _failure_reason(trial: TrialResult) -> str | None:
    if trial.status in PASSING:
        return None
    if trial.status == "TIMEOUT":
        return f"TIMEOUT after {trial.duration:.0f}s"
    checks = (trial.verification_result or {}).get("details") or []
    failed = [f"{c.get('name')}: {c.get('message')}".rstrip(": ") for c in checks if not c.get("passed")]
    if failed:
        return "; ".join(failed)
    return f"exit code {trial.exit_code}" if trial.exit_code else trial.status


def row_from_trial(
    trial: TrialResult, case: AgentCase, job: CellJob, run_id: str, service: str
) -> ResultRow:
    """The store row of one agent trial (same table and key rules as chat cells)."""
    verdict = trial.verification_result or {}
    passed = trial.status in PASSING
    score = verdict.get("score")
    return ResultRow(
        cell_key=job.key,
        run_id=run_id,
        group=job.eval.group,
        eval_id=job.eval.id,
        service_name=service,
        model=trial.model,
        requested_model=trial.model,
        run_index=trial.trial_index,
        case_id=trial.test_case,
        kind="agent",
        status=trial.status,
        input=case.instruction,
        ideal=None,
        output=trial.trace.assistant_text,
        tool_calls=[{"name": c.name, "arguments": c.args} for c in trial.trace.tool_calls],
        passed=passed,
        score=float(score) if score is not None else float(passed),
        failure_reason=_failure_reason(trial),
        error_kind=ERROR_KINDS.get(trial.status),
        attempt_count=1,
        retried=False,
        latency_ms=int(round(trial.duration * 1000)),
        prompt_tokens=trial.input_tokens,
        completion_tokens=trial.output_tokens,
        cached_tokens=trial.cache_read_tokens,
        cost_usd=trial.cost_usd,
        details={
            "verification_result": trial.verification_result,
            "tool_call_names": trial.tool_calls,
            "tool_call_count": trial.tool_call_count,
            "total_tokens": trial.total_tokens,
            "turn_count": trial.trace.turn_count,
            "trial_id": trial.id,
        },
        attempts=1,
        duration_s=trial.duration,
        exit_code=trial.exit_code,
        log_path=trial.log_path,
        stdout_log_path=trial.stdout_log_path,
        trial_dir=trial.trial_dir,
        case_hash=case.content_hash,
        evaluated_at=now_iso(),
    )
