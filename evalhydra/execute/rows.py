"""Every result row a run stores is built here: chat cells, agent trials, and re-judged cells.

The store's columns are :class:`~evalhydra.store.rows.ResultRow`'s fields; this module
decides what goes in them from a cell's outcome, so the three kinds of cell fill
them by the same rules (an error kind is ERROR, never FAIL; judge columns stay
NULL when no judge was called; accounting sums every call).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from evalhydra.agents.loader import AgentCase
from evalhydra.agents.models import TrialResult
from evalhydra.core import strictjson
from evalhydra.core.values import PASSING, Case, Completion, ErrorKind, MatchResult, ToolCall, Usage
from evalhydra.matchers.factory import judge_services_of
from evalhydra.plan.cells import CellJob
from evalhydra.store.rows import ResultRow, checked_row, now_iso

__all__ = [
    "CELL_CRASHED",
    "agent_row",
    "crashed_row",
    "attempt_row",
    "chat_row",
    "copied_row",
    "parent_details",
    "rejudged_row",
    "verdict_fields",
    "verdict_status",
]

#: The error kind stored for an agent trial's non-verdict status.
ERROR_KINDS = {"TIMEOUT": "timeout", "ERROR": "agent_error"}
_NO_USAGE = Usage()


def chat_row(
    job: CellJob,
    run_id: str,
    service_name: str,
    requested_model: str,
    completion: Completion,
    match: MatchResult,
    calls: list[tuple[str, Completion]],
    judge_service: str | None,
    *,
    attempts: int,
    history: list[dict[str, Any]] | None,
    latency_ms: float,
) -> ResultRow:
    """A chat cell's result row: ``attempts`` generations were made and ``history`` is theirs
    (None: one, without refinement); ``calls`` are every candidate and judge call."""
    case: Case = job.case
    error = match.error_kind or completion.error_kind
    verdict = verdict_fields(match, error, job.eval.matcher)
    if case.item is not None:  # an OpenAI Evals item: what its graders read, and the openai report shows
        verdict["details"] = {**(verdict["details"] or {}), "item": case.item}
    if completion.wire is not None:  # service.record_wire: as sent, for compare --attribute-server
        verdict["details"] = {**(verdict["details"] or {}), "wire": completion.wire}
    if case.attachments:  # named in report.html's case details
        verdict["details"] = {**(verdict["details"] or {}),
                              "attachments": [a.label or a.path for a in case.attachments]}
    return checked_row(ResultRow(
        cell_key=job.key,
        run_id=run_id,
        group=job.eval.group,
        eval_id=job.eval.id,
        service_name=service_name,
        model=requested_model,
        requested_model=requested_model,
        reply_model=completion.model if completion.ok else None,
        finish_reason=completion.finish_reason,
        response_id=completion.response_id,
        reasoning=completion.reasoning,
        ttft_ms=completion.ttft_ms,
        first_answer_ms=completion.first_answer_ms,
        output_tps=completion.output_tps,
        cached=1 if completion.cached else None,
        cached_latency_ms=completion.cached_latency_ms,
        saved_usd=completion.saved_usd if completion.cached or completion.batched else None,
        batched=1 if completion.batched else None,
        run_index=job.trial,
        case_id=case.id,
        kind="chat",
        input=case.input,
        ideal=case.ideal,
        output=completion.output,
        tool_calls=[stored_tool_call(t) for t in completion.tool_calls],
        latency_ms=int(round(latency_ms)),
        attempts=attempts,
        attempt_history=history,
        case_hash=case.content_hash,
        evaluated_at=now_iso(),
        status_code=completion.status_code,
        **verdict,
        **_accounting_fields(match, calls, judge_service),
    ))


def _accounting_fields(
    match: MatchResult, calls: list[tuple[str, Completion]], judge_service: str | None
) -> dict[str, Any]:
    """Attempts, retries, tokens and cost, with the judge's kept apart (judge columns are
    left out, so NULL, when no judge was called)."""
    if len(calls) == 1:  # the common case: one generation, no judge
        candidate = calls[0][1]
        return {
            "attempt_count": candidate.attempt_count,
            "retried": candidate.retried,
            "judge_service": judge_service,
            **_tokens(candidate.usage),
            "cost_usd": candidate.cost_usd,
        }
    judge = match.judge
    candidates = [c for kind, c in calls if kind == "candidate"]
    judges = [c for kind, c in calls if kind == "judge"]
    usage = sum((c.usage for c in candidates), Usage())
    judge_usage = sum((c.usage for c in judges), Usage()) if judges else _NO_USAGE
    return {
        "attempt_count": sum(c.attempt_count for _, c in calls),
        "retried": any(c.retried for _, c in calls),
        "judge_attempt_count": judge.attempt_count if judge else None,
        "judge_retried": judge.retried if judge else None,
        "judge_status_code": judge.status_code if judge else None,
        "judge_service": judge_service,
        "judge_model": judge.model if judge else None,
        **_tokens(usage),
        "judge_prompt_tokens": judge_usage.prompt_tokens if judges and judge_usage.reported else None,
        "judge_completion_tokens": judge_usage.completion_tokens if judges and judge_usage.reported else None,
        "cost_usd": sum(c.cost_usd for c in candidates),
        "judge_cost_usd": sum(c.cost_usd for c in judges) if judges else None,
    }


def _tokens(usage: Usage) -> dict[str, int | None]:
    """The token columns; all NULL when the service did not say (a stream without a usage chunk)."""
    if not usage.reported:
        return {"prompt_tokens": None, "completion_tokens": None, "cached_tokens": None,
                "reasoning_tokens": None}
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens, "reasoning_tokens": usage.reasoning_tokens or None}


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


#: The error kind of a cell whose handling raised: its trouble is stored, not the run's.
CELL_CRASHED = "cell_crashed"


def crashed_row(job: CellJob, run_id: str, service_name: str, model: str, exc: BaseException) -> ResultRow:
    """The row of a cell whose sending, reading, scoring or row-building raised ``exc``.

    It is an infrastructure error (re-sent by a rerun, left out of pass rates), with the
    exception's type and message as its reason, so one poisoned case never stops the run.
    """
    agent = isinstance(job.case, AgentCase)
    reason = f"{type(exc).__name__}: {exc}"[:2000]
    return ResultRow(
        cell_key=job.key, run_id=run_id, group=job.eval.group, eval_id=job.eval.id,
        service_name=service_name, model=job.model or model, requested_model=job.model or model,
        run_index=job.trial, case_id=job.case.name if agent else job.case.id,
        kind="agent" if agent else "chat", status="ERROR", passed=False, score=0.0,
        failure_reason=reason, error_kind=CELL_CRASHED, evaluated_at=now_iso())


def agent_row(
    trial: TrialResult, case: AgentCase, job: CellJob, run_id: str, service: str
) -> ResultRow:
    """The store row of one agent trial (same table and key rules as chat cells)."""
    verdict = trial.verification_result or {}
    passed = trial.status in PASSING
    score = verdict.get("score")
    return checked_row(ResultRow(
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
    ))


def rejudged_row(job: CellJob, run_id: str, parent_run_id: str, match: MatchResult,
                 latency_ms: float) -> ResultRow:
    """A re-judged cell's row: the stored result with the new verdict and the judge's accounting."""
    judge = match.judge
    attempts, retried = job.parent.candidate_attempts, job.parent.candidate_retried
    verdict = verdict_fields(match, match.error_kind, job.eval.matcher)
    verdict["details"] = {**(match.details or {}), "rejudge": _rejudge_info(job, parent_run_id)}
    return checked_row(_rejudge_base(
        job,
        run_id,
        attempt_count=attempts + (judge.attempt_count if judge else 0),
        retried=retried or bool(judge and judge.retried),
        judge_attempt_count=judge.attempt_count if judge else None,
        judge_retried=judge.retried if judge else None,
        judge_status_code=judge.status_code if judge else None,
        judge_model=judge.model if judge else None,
        latency_ms=int(round(latency_ms)),
        judge_prompt_tokens=judge.usage.prompt_tokens if judge else None,
        judge_completion_tokens=judge.usage.completion_tokens if judge else None,
        judge_cost_usd=judge.cost_usd if judge else None,
        **verdict,
    ))


def copied_row(job: CellJob, run_id: str, parent_run_id: str) -> ResultRow:
    """A re-judge's row for a stored result whose generation failed: copied, not judged."""
    details = {k: v for k, v in parent_details(job.parent.row).items() if k != "rejudge"}
    info = {**_rejudge_info(job, parent_run_id), "skipped": "the candidate call failed; nothing to judge"}
    return _rejudge_base(job, run_id, latency_ms=0, judge_cost_usd=None, details={**details, "rejudge": info})


def parent_details(parent: Mapping[str, Any]) -> dict[str, Any]:
    """A stored row's ``details`` as a dict ({} when absent or unreadable)."""
    raw = parent.get("details")
    try:
        value = strictjson.loads_plain(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {}


def _rejudge_base(job: CellJob, run_id: str, **changes: Any) -> ResultRow:
    base = ResultRow.from_mapping(job.parent.row)
    matcher = job.eval.matcher
    fields = {
        "cell_key": job.key, "run_id": run_id, "input": job.case.input, "ideal": job.case.ideal,
        "case_hash": job.case.content_hash or base.case_hash, "cost_usd": 0.0, "evaluated_at": now_iso(),
        "judge_service": ",".join(sorted(judge_services_of(matcher))) or None,
        "pass_threshold": matcher.get("pass_threshold", matcher.get("pass_score")),
    }
    return replace(base, **{**fields, **changes})


def _rejudge_info(job: CellJob, parent_run_id: str) -> dict[str, Any]:
    parent = job.parent
    return {
        "parent_run_id": parent_run_id,
        "parent_cell_key": parent.row["cell_key"],
        "parent_passed": bool(parent.row.get("passed")),
        "parent_score": parent.row.get("score"),
        "candidate_attempt_count": parent.candidate_attempts,
        "candidate_retried": parent.candidate_retried,
    }


def verdict_status(error: ErrorKind | str | None, passed: bool) -> str:
    """A chat result's status: any error kind is ERROR (never FAIL), else PASS or FAIL."""
    if error is not None:
        return "ERROR"
    return "PASS" if passed else "FAIL"


def verdict_fields(match: MatchResult, error: ErrorKind | None, matcher: Mapping[str, Any]) -> dict[str, Any]:
    """Status, pass, score and the judge's feedback of a scored chat cell (or a re-judge)."""
    return {
        "status": verdict_status(error, match.passed),
        "passed": bool(match.passed) and error is None,
        "score": float(match.score),
        "failure_reason": None if match.passed else match.reason,
        "error_kind": str(error) if error else None,
        "details": match.details,
        "feedback": match.feedback,
        "rubric_scores": match.rubric_scores,
        "grader_scores": match.grader_scores,
        "failure_category": match.failure_category,
        "suggested_fix": match.suggested_fix,
        "pass_threshold": matcher.get("pass_threshold", matcher.get("pass_score")),
    }


def attempt_row(cell_key: str, run_id: str, call: str, record: Any) -> dict[str, Any]:
    """One ``attempts`` row for an :class:`~evalhydra.core.values.AttemptRecord`."""
    return {
        "cell_key": cell_key,
        "run_id": run_id,
        "call": call,
        "attempt": record.attempt,
        "status_code": record.status_code,
        "error_kind": str(record.error_kind) if record.error_kind else None,
        "latency_ms": round(record.latency_ms, 3),
        "error_message": record.error_message,
    }


def stored_tool_call(call: ToolCall) -> dict[str, Any]:
    """A result row's record of a tool call: its name and arguments as sent (and
    ``arguments_object: true`` when the provider sent them as a JSON object, not a string)."""
    record: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
    if call.arguments_object:
        record["arguments_object"] = True
    return record
