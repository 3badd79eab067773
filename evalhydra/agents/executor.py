"""Run one agent trial as an isolated subprocess and judge it.

Each trial gets ``<output>/<safe_model>/<case>/trial-<N>/``, wiped first::

    workdir/     a fresh copy of the case's workdir/; the agent's cwd
    history/     <PREFIX>_LLM_HISTORY_DIR; the agent writes <session>.json here
    notes/       <PREFIX>_LLM_JOURNAL_DIR
    stdout.log   the agent's stdout and stderr, interleaved

The agent runs in a new session (its own process group). When the timeout
expires, and after a normal exit, the group and every process that carries the
trial's token are SIGKILLed, so no helper outlives its trial, not even one that
started a session of its own; its output is capped (see
:mod:`evalhydra.agents.process`).

Status precedence: a ``VERIFICATION_RESULT: X`` line (only with
``service.honor_verification_marker``), then a non-zero exit (ERROR, the
validator is skipped), then the validator's status. A validator that raises
makes the trial ERROR with a ``validator_error`` check.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from evalhydra.agents.command import build_argv, build_env, safe_model_name, session_name, template_name
from evalhydra.agents.loader import AgentCase
from evalhydra.agents.models import (
    TrialResult,
    TrialTrace,
    ValidationCheck,
    ValidationResult,
)
from evalhydra.agents.process import run_bounded
from evalhydra.agents.trace import trace_from_history
from evalhydra.agents.usage import TokenUsage, UsageOutOfRange, cost_usd, last_json_object, parse_usage
from evalhydra.agents.zrb_compat import trace_for_validator
from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import VALIDATION_STATUSES

__all__ = ["TrialPaths", "run_trial", "trial_paths", "verification_marker"]

MARKER_PREFIX = "VERIFICATION_RESULT:"


@dataclass(frozen=True, slots=True)
class TrialPaths:
    """Where one trial's files live."""

    trial_dir: Path
    workdir: Path
    history_dir: Path
    notes_dir: Path
    stdout_log: Path
    history_file: Path
    session: str


def trial_paths(output_root: Path, model: str, case: str, trial_index: int) -> TrialPaths:
    """Return the layout of cell (model, case, trial_index) under ``output_root``.

    Paths are absolute: the agent runs in ``workdir/`` and must still find
    ``history/`` and ``notes/`` through its environment.
    """
    trial_dir = Path(output_root).absolute() / safe_model_name(model) / case / f"trial-{trial_index}"
    session = session_name(model, case, trial_index)
    return TrialPaths(
        trial_dir=trial_dir,
        workdir=trial_dir / "workdir",
        history_dir=trial_dir / "history",
        notes_dir=trial_dir / "notes",
        stdout_log=trial_dir / "stdout.log",
        history_file=trial_dir / "history" / f"{session}.json",
        session=session,
    )


def verification_marker(log: str) -> str | None:
    """Return X of the first line ``VERIFICATION_RESULT: X`` with X in EXCELLENT/PASS/FAIL."""
    for line in log.splitlines():
        stripped = line.strip()
        if stripped.startswith(MARKER_PREFIX):
            value = stripped[len(MARKER_PREFIX) :].strip().upper()
            if value in VALIDATION_STATUSES:
                return value
    return None


async def run_trial(
    case: AgentCase,
    cfg: ServiceConfig,
    model: str,
    trial_index: int,
    output_root: Path,
    *,
    timeout_s: float | None = None,
    limiter: trio.CapacityLimiter | None = None,
    trace: tuple[str, str] | None = None,
) -> TrialResult:
    """Run one trial of ``case`` with ``model`` and return its result.

    The agent's and the validator's failures become ERROR or TIMEOUT results;
    only cancellation and programming errors propagate.

    Args:
        case: The loaded case.
        cfg: A ``kind: command`` service, already checked by
            :func:`~evalhydra.agents.validate_command_service`.
        model: The model name passed to the CLI.
        trial_index: 1-based trial number.
        output_root: Where trial directories go.
        timeout_s: Per-trial timeout; defaults to ``cfg.timeout_s``.
        limiter: Held for the whole trial when given.
        trace: The cell's W3C trace context and baggage, given to the CLI as ``TRACEPARENT`` and
            ``BAGGAGE`` (telemetry; OpenTelemetry's environment carriers).

    Returns:
        The trial's result.
    """
    if limiter is None:
        return await _run_trial(case, cfg, model, trial_index, output_root, timeout_s, trace)
    async with limiter:
        return await _run_trial(case, cfg, model, trial_index, output_root, timeout_s, trace)


@dataclass(frozen=True, slots=True)
class _Cell:
    case: AgentCase
    cfg: ServiceConfig
    model: str
    trial_index: int
    paths: TrialPaths
    trace: tuple[str, str] | None = None  # the cell's trace context and baggage (telemetry)

    def result(self, status: str, duration: float, exit_code: int, **extra: Any) -> TrialResult:
        return TrialResult(
            model=self.model,
            test_case=self.case.name,
            trial_index=self.trial_index,
            status=status,
            duration=duration,
            exit_code=exit_code,
            log_path=str(self.paths.history_file),
            stdout_log_path=str(self.paths.stdout_log),
            trial_dir=str(self.paths.trial_dir),
            **extra,
        )


async def _run_trial(
    case: AgentCase,
    cfg: ServiceConfig,
    model: str,
    trial_index: int,
    output_root: Path,
    timeout_s: float | None,
    trace: tuple[str, str] | None = None,
) -> TrialResult:
    cell = _Cell(case, cfg, model, trial_index, trial_paths(output_root, model, case.name, trial_index),
                 trace)
    await trio.to_thread.run_sync(_prepare_trial_dir, cell.paths, case)
    timeout = cfg.timeout_s if timeout_s is None else timeout_s
    start = time.perf_counter()
    try:
        returncode, timed_out = await _execute(cell, timeout)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        cell.paths.stdout_log.write_text(f"[ERROR: {exc}]\n", encoding="utf-8")
        return cell.result("ERROR", time.perf_counter() - start, -1)
    duration = time.perf_counter() - start
    if timed_out:
        return _timeout_result(cell, duration, timeout)
    return await _judge(cell, duration, returncode or 0)


def _prepare_trial_dir(paths: TrialPaths, case: AgentCase) -> None:
    if paths.trial_dir.exists():
        shutil.rmtree(paths.trial_dir)
    paths.trial_dir.mkdir(parents=True)
    if case.workdir is not None:
        shutil.copytree(case.workdir, paths.workdir)
    else:
        paths.workdir.mkdir()
    paths.history_dir.mkdir()
    paths.notes_dir.mkdir()


async def _execute(cell: _Cell, timeout: float) -> tuple[int | None, bool]:
    """Run the agent; return (returncode, timed_out). None of its processes outlives the trial,
    and its output is capped (:mod:`evalhydra.agents.process`)."""
    paths = cell.paths
    argv = build_argv(cell.cfg, cell.model, cell.case.instruction, paths.session, paths.workdir)
    env = build_env(cell.cfg, paths.history_dir, paths.notes_dir)
    if cell.trace is not None:
        env = {**env, "TRACEPARENT": cell.trace[0], "BAGGAGE": cell.trace[1]}
    return await run_bounded(argv, cwd=paths.workdir, env=env, log_path=paths.stdout_log, timeout=timeout)


def _timeout_result(cell: _Cell, duration: float, timeout: float) -> TrialResult:
    with cell.paths.stdout_log.open("a", encoding="utf-8") as log:
        log.write(f"\n[TIMEOUT after {timeout:g}s]\n")
    trace = trace_from_history(cell.paths.history_file)
    return cell.result(
        "TIMEOUT",
        duration,
        -1,
        tool_calls=list(trace.tool_names),
        tool_call_count=len(trace.tool_names),
        trace=trace,
    )


async def _judge(cell: _Cell, duration: float, exit_code: int) -> TrialResult:
    log = cell.paths.stdout_log.read_text(encoding="utf-8", errors="replace")
    template = template_name(cell.cfg)
    if template == "claude-code":
        _snapshot_json_output(log, cell.paths.history_file)
    trace = trace_from_history(cell.paths.history_file)
    try:
        usage = parse_usage(log, template)
    except UsageOutOfRange as exc:
        with cell.paths.stdout_log.open("a", encoding="utf-8") as out:
            out.write(f"\n[ERROR: invalid_response: {exc}]\n")
        return cell.result("ERROR", duration, exit_code, tool_calls=list(trace.tool_names),
                           tool_call_count=len(trace.tool_names), trace=trace)
    marker = verification_marker(log) if cell.cfg.honor_verification_marker else None
    if marker is None and exit_code != 0:
        status, verdict = "ERROR", None
    else:
        status, verdict = await _validate(cell, log, trace, marker)
    return cell.result(
        status,
        duration,
        exit_code,
        verification_result=verdict.to_dict() if verdict else None,
        tool_calls=list(trace.tool_names),
        tool_call_count=len(trace.tool_names),
        trace=trace,
        cost_usd=cost_usd(usage, cell.cfg.pricing),
        **_token_fields(usage),
    )


def _token_fields(usage: TokenUsage) -> dict[str, int]:
    return {
        "total_tokens": usage.total_tokens,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
    }


def _snapshot_json_output(log: str, history_file: Path) -> None:
    """Keep claude-code's JSON result as the history file (it keeps its own elsewhere)."""
    if history_file.exists():
        return
    data = last_json_object(log)
    if data is not None:
        history_file.write_text(json.dumps(data, indent=2), encoding="utf-8")


async def _validate(
    cell: _Cell, log: str, trace: TrialTrace, marker: str | None
) -> tuple[str, ValidationResult]:
    try:
        verdict = await trio.to_thread.run_sync(
            _call_validator, cell.case.validator, cell.paths.workdir, log, trace
        )
    except Exception as exc:  # user code: any failure is an ERROR row
        check = ValidationCheck(name="validator_error", passed=False, message=str(exc))
        return "ERROR", ValidationResult(status="FAIL", score=0.0, details=[check])
    return marker or verdict.status, verdict


def _call_validator(validator: Any, workdir: Path, log: str, trace: TrialTrace) -> ValidationResult:
    if _accepts_trace(validator.validate):
        raw = validator.validate(workdir, log, trace=trace_for_validator(trace))
    else:  # a validator written before traces existed
        raw = validator.validate(workdir, log)
    return ValidationResult.coerce(raw)


def _accepts_trace(func: Any) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "trace" or p.kind is p.VAR_KEYWORD for p in params)
