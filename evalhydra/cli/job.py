"""One job, end to end: plan → run → store → reports → summary → exit code.

Everything here is a plain function of a composed config, so tests call
:func:`run_config` directly (with :func:`evalhydra.config.compose.compose_config`).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio
from omegaconf import DictConfig

from evalhydra.cli.diagnose import fix_hints, unmeasured
from evalhydra.cli.dry_run import print_dry_run
from evalhydra.config.defaults import DEFAULT_REPORT_FORMATS
from evalhydra.config.schema import ServiceConfig
from evalhydra.errors import EvalHydraError, did_you_mean
from evalhydra.execute.progress import Progress
from evalhydra.execute.runner import RunOutcome, execute
from evalhydra.http.pool import TRANSPORTS, tls_context
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import count_cells
from evalhydra.plan.model import RunPlan
from evalhydra.registry.definitions import registry_origin
from evalhydra.reports.summary import print_run_summary, run_gate
from evalhydra.reports.writer import normalize_formats, write_run_reports
from evalhydra.services.openai_compat import check_header_values, missing_api_key_warning
from evalhydra.store.db import Store, open_store

__all__ = [
    "EXIT_GATE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNMEASURED",
    "EXIT_USAGE",
    "JobResult",
    "publish_run",
    "report_formats",
    "run_config",
    "run_job",
    "run_plan",
]

#: The exit codes, a contract CI can gate on (README "Exit codes").
EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_UNMEASURED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def run_config(
    cfg: DictConfig,
    *,
    overrides: Sequence[str] = (),
    output_dir: str | None = None,
    sweep_dir: str | None = None,
) -> int:
    """Run a composed config; print the summary; return the process exit code.

    User-fixable problems are printed as one ``error:`` message (no traceback)
    and give exit code 2.
    """
    try:
        plan = build_plan(cfg, overrides)
        if sweep_dir:  # a sweep job: its runs row names Hydra's sweep directory itself (not the job
            plan = replace(plan, sweep_dir=sweep_dir)  # folder's parent: a swept value may hold "/")
        code = run_plan(plan, output_dir=Path(output_dir) if output_dir else None)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_USAGE
    if sweep_dir and output_dir:
        record_job_exit(Path(output_dir), code)
    return code


#: A sweep job's exit code, in its output folder (the launching process reads them all).
JOB_EXIT_FILE = ".evalhydra-exit-code"


#: The worst exit code of this process's jobs and sweeps (the command exits with it).
_WORST_EXIT: list[int] = [0]


def note_exit_code(code: int) -> None:
    """Keep ``code`` if it is worse than any seen in this process."""
    _WORST_EXIT[0] = max(_WORST_EXIT[0], code)


def worst_exit_code() -> int:
    """The worst exit code noted in this process."""
    return _WORST_EXIT[0]


def record_job_exit(output_dir: Path, code: int) -> None:
    """Leave a sweep job's exit code where the sweep's end can find it, whatever the launcher."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / JOB_EXIT_FILE).write_text(f"{code}\n", encoding="utf-8")


def sweep_exit_code(sweep_dir: Path, since: float = 0.0) -> int:
    """The worst exit code the sweep's jobs left since ``since`` (a unix time; 0 when none did)."""
    files = [p for p in sweep_dir.rglob(JOB_EXIT_FILE) if p.stat().st_mtime >= since]
    return max((int(p.read_text(encoding="utf-8").strip() or 0) for p in files), default=0)


def run_plan(plan: RunPlan, *, output_dir: Path | None = None) -> int:
    """Execute a plan and write its reports; return the exit code."""
    return run_job(plan, output_dir=output_dir).exit_code


@dataclass
class JobResult:
    """What one job did: its exit code, its run (None for a dry run) and the per-target stats."""

    exit_code: int
    run_id: str | None = None
    stats: list[dict[str, Any]] = field(default_factory=list)


def run_job(plan: RunPlan, *, output_dir: Path | None = None) -> JobResult:
    """Execute a plan, write its reports and print its summary.

    Raises:
        EvalHydraError: A problem found before the first call (nothing is sent or stored).
    """
    report_formats(plan)  # an unknown format fails now, not after every cell has run
    _check_services(plan)
    total = count_cells(plan)
    if plan.run.dry_run:
        print_dry_run(plan)
        return JobResult(EXIT_OK)
    store = open_store(plan.store_path)
    try:
        progress = Progress(total, enabled=plan.run.progress, label=f"[{plan.service.name}{_shard(plan)}] ")
        outcome = trio.run(partial(execute, plan, store, total=total, progress=progress))
        with _further_interrupts_ignored(outcome.interrupted):
            return _finish(plan, store, outcome, output_dir)
    finally:
        store.close()


def _finish(plan: RunPlan, store: Store, outcome: RunOutcome, output_dir: Path | None) -> JobResult:
    """Write the run's reports, print the summary, and turn gates into an exit code."""
    out = output_dir or plan.store_path.parent / "runs" / outcome.run_id
    gate_failed, stats = publish_run(
        store, outcome, out, formats=report_formats(plan), fail_under=plan.run.fail_under,
        per_eval=plan.run.fail_under_per_eval, header=run_header(plan),
        hints=fix_hints(plan, store, outcome.run_id))
    code = _exit_code(plan, outcome, stats, gate_failed)
    store.finish_run(outcome.run_id, exit_code=code)
    return JobResult(code, outcome.run_id, stats)


def _exit_code(plan: RunPlan, outcome: RunOutcome, stats: list[dict[str, Any]], gate_failed: bool) -> int:
    if outcome.interrupted:
        print(f"interrupted: {outcome.executed} results stored; rerun the same command to resume.",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if outcome.budget_exhausted:
        print(f"stopped scheduling: run.max_cost_usd={plan.run.max_cost_usd} reached.", file=sys.stderr)
    reasons = unmeasured(stats, plan.run.max_error_rate)
    sys.stdout.flush()
    for reason in reasons:
        print(f"error: could not measure: {reason}", file=sys.stderr)
    if reasons:
        return EXIT_UNMEASURED
    return EXIT_GATE if gate_failed else EXIT_OK


def run_header(plan: RunPlan) -> str:
    """The summary's first line: which registry and store this run used."""
    origin = registry_origin(plan.registry_root)
    return f"registry: {plan.registry_root} ({origin}) · store: {plan.store_path}{_shard(plan)}"


def _shard(plan: RunPlan) -> str:
    """`` · shard 2/4`` for a sharded run (1-based), else ""."""
    run = plan.run
    return f" · shard {run.shard_index + 1}/{run.shard_count}" if run.shard_count > 1 else ""


def report_formats(plan: RunPlan) -> tuple[str, ...]:
    """The plan's ``report`` formats, checked.

    Raises:
        EvalHydraError: An unknown format, naming the valid ones.
    """
    try:
        return normalize_formats(plan.config.get("report") or DEFAULT_REPORT_FORMATS)
    except EvalHydraError as exc:
        raise EvalHydraError(f"report: {exc.message}", exc.hint) from None


def publish_run(store: Store, outcome: RunOutcome, out: Path, *, formats: Sequence[str],
                fail_under: float | None, per_eval: Mapping[str, float] | None, header: str | None = None,
                hints: Sequence[str] = ()) -> tuple[bool, list[dict[str, Any]]]:
    """Write a finished run's reports, print its summary and apply the gates (all in SQL).

    Returns:
        Whether a pass rate is below ``fail_under`` or its per-eval threshold, and the
        per-target stats of the summary.
    """
    write_run_reports(store, [outcome.run_id], out, formats=formats)
    stats = print_run_summary(store, outcome, out, header=header, hints=hints)
    thresholds = dict(per_eval or {})
    if fail_under is None and not thresholds:
        return False, stats
    return bool(run_gate(store, [outcome.run_id], fail_under, thresholds, stats=stats)), stats


@contextmanager
def _further_interrupts_ignored(interrupted: bool) -> Iterator[None]:
    """After a Ctrl-C stopped the run, more Ctrl-Cs must not cut its reports short."""
    if not interrupted or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _check_transport(svc: ServiceConfig) -> None:
    """``service.transport`` names a transport, and ``service.ca_bundle`` (if set) holds CAs."""
    if svc.transport not in TRANSPORTS:
        raise EvalHydraError(f"service '{svc.name}': service.transport={svc.transport} is not a transport.",
                             did_you_mean(svc.transport, TRANSPORTS))
    tls_context(svc.verify, svc.ca_bundle)


def _check_services(plan: RunPlan) -> None:
    """Check every key and header value can be sent, warn once per service whose
    ``api_key_env`` variable is unset (the seed does not fail), and say so when the
    service's ``max_concurrency`` holds the run below ``run.concurrency``."""
    services = {svc.name: svc for svc in [plan.service, *plan.judges.values()] if svc.kind == "openai"}
    for svc in services.values():
        check_header_values(svc)
        _check_transport(svc)
    if plan.service.kind == "openai" and plan.run.concurrency > plan.service.max_concurrency:
        print(f"note: run.concurrency={plan.run.concurrency}, but service '{plan.service.name}' sends at "
              f"most {plan.service.max_concurrency} requests at once (service.max_concurrency); raise it to "
              "send more.", file=sys.stderr)
    for svc in services.values():
        warning = missing_api_key_warning(svc)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
