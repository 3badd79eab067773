"""Agent-CLI cells: run one trial in an isolated directory and turn it into a store row.

Agent trials live under ``<run.output_dir or store dir/agent_trials>/<service>/``
as ``<safe_model>/<case>/trial-<N>/`` (zrb's layout); the directory is wiped
before a cell runs again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalhydra.agents import AgentCase, TrialResult, run_trial
from evalhydra.cells import CellJob, now_iso
from evalhydra.config import RunPlan

__all__ = [
    "agent_output_root",
    "experiment_from_store",
    "row_from_trial",
    "run_agent_cell",
    "trial_from_row",
    "write_agent_artifacts",
]

PASSING = ("EXCELLENT", "PASS")
ERROR_KINDS = {"TIMEOUT": "timeout", "ERROR": "agent_error"}


def agent_output_root(plan: RunPlan) -> Path:
    """Where this service's trial directories go."""
    base = Path(plan.run.output_dir) if plan.run.output_dir else plan.store_path.parent / "agent_trials"
    return base.expanduser().resolve() / plan.service.name


async def run_agent_cell(
    plan: RunPlan, job: CellJob, run_id: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one agent trial; return its result row (no HTTP attempts to record)."""
    case: AgentCase = job.case
    trial = await run_trial(case, plan.service, plan.model, job.trial, agent_output_root(plan))
    return row_from_trial(trial, case, job, run_id, plan.service.name), []


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
) -> dict[str, Any]:
    """The store row of one agent trial (same table and key rules as chat cells)."""
    verdict = trial.verification_result or {}
    passed = trial.status in PASSING
    score = verdict.get("score")
    return {
        "cell_key": job.key,
        "run_id": run_id,
        "group": job.eval.group,
        "eval_id": job.eval.id,
        "service_name": service,
        "model": trial.model,
        "requested_model": trial.model,
        "run_index": trial.trial_index,
        "case_id": trial.test_case,
        "kind": "agent",
        "status": trial.status,
        "input": case.instruction,
        "ideal": None,
        "output": trial.trace.assistant_text,
        "tool_calls": [{"name": c.name, "args": c.args} for c in trial.trace.tool_calls],
        "passed": passed,
        "score": float(score) if score is not None else float(passed),
        "failure_reason": _failure_reason(trial),
        "error_kind": ERROR_KINDS.get(trial.status),
        "attempt_count": 1,
        "retried": False,
        "latency_ms": int(round(trial.duration * 1000)),
        "prompt_tokens": trial.input_tokens,
        "completion_tokens": trial.output_tokens,
        "cached_tokens": trial.cache_read_tokens,
        "cost_usd": trial.cost_usd,
        "details": {
            "verification_result": trial.verification_result,
            "tool_call_names": trial.tool_calls,
            "tool_call_count": trial.tool_call_count,
            "total_tokens": trial.total_tokens,
            "turn_count": trial.trace.turn_count,
            "trial_id": trial.id,
        },
        "attempts": 1,
        "duration_s": trial.duration,
        "exit_code": trial.exit_code,
        "log_path": trial.log_path,
        "stdout_log_path": trial.stdout_log_path,
        "trial_dir": trial.trial_dir,
        "case_hash": case.content_hash,
        "evaluated_at": now_iso(),
    }


def trial_from_row(row: dict[str, Any]) -> TrialResult:
    """Rebuild the zrb TrialResult of a stored agent row (for results.json and report.md)."""
    import json

    details = row.get("details")
    details = json.loads(details) if isinstance(details, str) else (details or {})
    return TrialResult(
        id=details.get("trial_id") or row["cell_key"],
        model=row["model"],
        test_case=row["case_id"],
        trial_index=row["run_index"],
        status=row["status"],
        duration=float(row.get("duration_s") or 0.0),
        exit_code=int(row.get("exit_code") or 0),
        log_path=row.get("log_path") or "",
        stdout_log_path=row.get("stdout_log_path") or "",
        verification_result=details.get("verification_result"),
        total_tokens=int(details.get("total_tokens") or 0),
        input_tokens=int(row.get("prompt_tokens") or 0),
        output_tokens=int(row.get("completion_tokens") or 0),
        cache_read_tokens=int(row.get("cached_tokens") or 0),
        tool_calls=list(details.get("tool_call_names") or []),
        tool_call_count=int(details.get("tool_call_count") or 0),
        cost_usd=float(row.get("cost_usd") or 0.0),
        trial_dir=row.get("trial_dir") or "",
    )


def experiment_from_store(runs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """zrb's ``experiment.json`` for the agent rows of some runs (a pure function of the store)."""
    import json

    first = runs[0] if runs else {}
    config = first.get("config")
    trials = [trial_from_row(r).to_dict() for r in rows if r.get("kind") == "agent"]
    return {
        "id": first.get("run_id"),
        "config": json.loads(config) if isinstance(config, str) else config,
        "results": trials,
        "started_at": first.get("started_at"),
        "completed_at": runs[-1].get("finished_at") if runs else None,
    }


def write_agent_artifacts(
    runs: list[dict[str, Any]], rows: list[dict[str, Any]], out_dir: Path
) -> list[Path]:
    """Write zrb's ``results.json`` and ``experiment.json`` (atomically) when there are agent rows."""
    from evalhydra.agents import write_json_atomic

    experiment = experiment_from_store(runs, rows)
    if not experiment["results"]:
        return []
    write_json_atomic(out_dir / "results.json", experiment["results"])
    write_json_atomic(out_dir / "experiment.json", experiment)
    return [out_dir / "results.json", out_dir / "experiment.json"]
