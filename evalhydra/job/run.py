"""One job, end to end: plan → pre-flight checks → run → store → reports → summary → exit code.

Everything here is a plain function of a plan, so the command line
(:mod:`evalhydra.cli.jobs`), the Python API (:mod:`evalhydra.api`) and tests call
:func:`run_job` alike. A re-judge (:mod:`evalhydra.job.rejudge`) runs other cells
and ends through the same :func:`finish_job`.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio

from evalhydra.analysis.evalstats import Totals
from evalhydra.analysis.gates import GateFailure, Gates
from evalhydra.analysis.judges import has_labels
from evalhydra.analysis.runfacts import failing_cases
from evalhydra.analysis.runsummary import run_summary
from evalhydra.analysis.targetstats import TargetStats
from evalhydra.config.defaults import DEFAULT_REPORT_FORMATS
from evalhydra.core.errors import EvalHydraError
from evalhydra.execute.progress import Progress
from evalhydra.execute.runner import RunOutcome, execute
from evalhydra.execute.runrecord import new_run_id
from evalhydra.job.diagnose import fix_hints, unmeasured
from evalhydra.job.dry_run import print_dry_run
from evalhydra.job.exit_codes import ExitCode
from evalhydra.job.judged import judge_figures
from evalhydra.plan.cells import count_cells
from evalhydra.plan.model import RunPlan
from evalhydra.plan.preflight import check_services
from evalhydra.plan.selection import failed_cases
from evalhydra.registry.definitions import registry_origin
from evalhydra.reports.summary import (
    append_step_summary,
    gate_verdict_md,
    plural,
    print_run_summary,
    run_gate,
)
from evalhydra.reports.writer import normalize_formats, write_run_reports
from evalhydra.services.cache import ResponseCache
from evalhydra.store.db import Store, open_store
from evalhydra.telemetry.cells import CellFacts
from evalhydra.telemetry.export import SpanSink, open_sink

__all__ = ["JobResult", "finish_job", "plan_gates", "preflight", "publish_run", "report_formats",
           "run_header", "run_job", "run_plan"]

def run_plan(plan: RunPlan, *, output_dir: Path | None = None) -> ExitCode:
    """Execute a plan and write its reports; return the exit code."""
    return run_job(plan, output_dir=output_dir).exit_code


@dataclass
class JobResult:
    """What one job did: its exit code, its run (None for a dry run) and the per-target stats."""

    exit_code: ExitCode
    run_id: str | None = None
    stats: list[TargetStats] = field(default_factory=list)


def run_job(plan: RunPlan, *, output_dir: Path | None = None) -> JobResult:
    """Execute a plan, write its reports and print its summary.

    Raises:
        EvalHydraError: A problem found before the first call (nothing is sent or stored).
    """
    preflight(plan)
    plan = with_rerun_cases(plan)
    total = count_cells(plan)
    if total == 0 and plan.selection:
        return _nothing_selected(plan)
    if plan.run.dry_run:
        print_dry_run(plan)
        return JobResult(ExitCode.OK)
    store = open_store(plan.store_path)
    try:
        progress = Progress(total, enabled=plan.run.progress, label=f"[{plan.service.name}{_shard(plan)}] ")
        run_id = new_run_id(plan)
        out = output_dir or plan.store_path.parent / "runs" / run_id
        spans = _span_sink(plan, out, store)
        started = time.time_ns()
        try:
            outcome = trio.run(partial(execute, plan, store, run_id=run_id, total=total, progress=progress,
                                       spans=spans))
            result = finish_job(plan, store, outcome, out, header=run_header(plan))
            if spans is not None:
                spans.record_run(run_id, started, time.time_ns(), [_target(s) for s in result.stats])
            return result
        finally:
            if spans is not None:
                spans.close()
    finally:
        store.close()


def _span_sink(plan: RunPlan, out: Path, store: Store) -> SpanSink | None:
    """Where the run's cells go as OpenTelemetry spans (``telemetry.export``; None: off)."""
    telemetry = plan.telemetry
    if telemetry is None:
        return None
    judges = judge_figures(store, plan) if has_labels(store.conn) else {}
    facts = {ev.id: CellFacts(str(ev.matcher.get("kind") or "validator"), ev.result_hash, judges.get(ev.id))
             for ev in plan.evals}
    return open_sink(telemetry.export, run_dir=out, endpoint=telemetry.endpoint, facts=facts,
                     capture_content=telemetry.capture_content)


def _target(stats: TargetStats) -> dict[str, Any]:
    """A target's figures as the run span shows them."""
    judged = stats.judged
    return {"eval_id": stats.eval, "service": stats.service, "model": stats.model, "cells": stats.n,
            "cases": stats.n_cases, "pass_rate": stats.pass_rate, "ci_low": stats.ci_low,
            "ci_high": stats.ci_high, "ci_method": stats.ci_method,
            "corrected_pass_rate": judged.corrected_pass_rate if judged else None,
            "corrected_ci_low": judged.corrected_ci_low if judged else None,
            "corrected_ci_high": judged.corrected_ci_high if judged else None}


def with_rerun_cases(plan: RunPlan) -> RunPlan:
    """The plan with ``run.rerun=failed`` resolved from the store: per eval, the cases whose last
    verdict on this service was FAIL or ERROR.

    Raises:
        EvalHydraError: The store holds no earlier run of a selected eval on this service.
    """
    if plan.selection.rerun != "failed":
        return plan
    only = failed_cases(plan.store_path, plan.service.name, [ev.id for ev in plan.evals])
    return replace(plan, selection=replace(plan.selection, only=only))


def _nothing_selected(plan: RunPlan) -> JobResult:
    """A selection that leaves no case: nothing to rerun is done (exit 0); ids or tags that match
    nothing are a mistake to fix (exit 2)."""
    evals = ", ".join(ev.id for ev in plan.evals)
    if plan.selection.rerun and not plan.selection.patterns and not plan.selection.tags:
        print(f"nothing to rerun: the last run of {evals} on service '{plan.service.name}' had no FAIL or "
              "ERROR.")
        return JobResult(ExitCode.OK)
    raise EvalHydraError(f"the selection ({plan.selection.describe()}) matches no case of {evals}.",
                         "Check run.cases and run.tags against the dataset's ids and tags "
                         "(evalhydra results latest lists a run's case ids).")


def preflight(plan: RunPlan) -> None:
    """Every check of a job before its first call: the report formats (an unknown one fails
    now, not after every cell has run), the services (:func:`~evalhydra.plan.preflight.check_services`)
    and the response cache's file.

    Raises:
        EvalHydraError: What the user must fix; nothing was sent or stored.
    """
    report_formats(plan)
    check_services(plan)
    if plan.cache is not None:  # an unusable cache.path fails now, before a run is recorded
        ResponseCache(plan.cache.path, plan.cache.expiry_s).close()


def finish_job(plan: RunPlan, store: Store, outcome: RunOutcome, out: Path, *, header: str | None = None,
               resume_hint: str = "rerun the same command to resume") -> JobResult:
    """Write a run's reports, print its summary, apply its gates, and record its exit code.

    Args:
        plan: The plan the run executed.
        store: The store the run wrote to.
        outcome: What the runner reported.
        out: The report directory.
        header: The summary's first line (None: none).
        resume_hint: What an interrupted run's message tells the user to do.

    Returns:
        The exit code (also stored as ``runs.exit_code``), the run id and the per-target stats.
    """
    with _further_interrupts_ignored(outcome.interrupted):
        summary = run_summary(store.conn, [outcome.run_id])  # the viewer's, and names the judges
        # saved first: the reports' and the summary's selections read the runs it names (sources)
        store.save_run_summary(outcome.run_id, summary)
        gate_failed, stats = publish_run(
            store, outcome, out, formats=report_formats(plan), gates=plan_gates(plan), header=header,
            hints=fix_hints(plan, store, outcome.run_id), summary=summary)
        code = _exit_code(plan, outcome, stats, gate_failed, resume_hint)
        store.finish_run(outcome.run_id, exit_code=int(code))  # sqlite3 binds plain ints only
    return JobResult(code, outcome.run_id, stats)


def _exit_code(plan: RunPlan, outcome: RunOutcome, stats: list[TargetStats], gate_failed: bool,
               resume_hint: str) -> ExitCode:
    if outcome.interrupted:
        print(f"interrupted: {outcome.executed} results stored; {resume_hint}.", file=sys.stderr)
        return ExitCode.INTERRUPTED
    if outcome.budget_exhausted:
        print(f"stopped scheduling: run.max_cost_usd={plan.run.max_cost_usd} reached.", file=sys.stderr)
    for endpoint in outcome.rate_limited:  # part of the summary: how the run lived within the limits
        paced = f"paced at {endpoint.pace:.0f} requests/s, " if endpoint.pace else ""
        print(f"rate limited: {endpoint.endpoint} refused {plural(endpoint.refusals, 'request')} (429),"
              f" each sent again after its wait; {paced}adaptive concurrency ended at {endpoint.limit} in"
              f" flight (lowest {endpoint.lowest}, ceiling {endpoint.ceiling}).")
    if outcome.dead_endpoint:
        unsent = outcome.total - outcome.executed - outcome.skipped
        print(f"stopped sending to service '{plan.service.name}': {outcome.dead_endpoint}; {unsent} "
              f"cell{'s' if unsent != 1 else ''} not sent (rerun once it answers; run.fail_fast=false "
              "sends every cell anyway).", file=sys.stderr)
    reasons = unmeasured(stats, plan.run.max_error_rate)
    if outcome.deferred:
        reasons.append(f"{plural(outcome.deferred, 'cell')} not stored: {outcome.deferred_reason}; rerun the"
                       " same command to collect them (evalhydra batches lists the store's batches)")
    sys.stdout.flush()
    for reason in reasons:
        print(f"error: could not measure: {reason}", file=sys.stderr)
    if reasons:
        return ExitCode.UNMEASURED
    return ExitCode.GATE if gate_failed else ExitCode.OK


def run_header(plan: RunPlan) -> str:
    """The summary's first line: which registry and store this run used."""
    origin = registry_origin(plan.registry_root)
    selected = f" · selection: {plan.selection.describe()}" if plan.selection else ""
    return f"registry: {plan.registry_root} ({origin}) · store: {plan.store_path}{_shard(plan)}{selected}"


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


def plan_gates(plan: RunPlan) -> Gates:
    """The CI gates a plan's ``run`` section sets."""
    return Gates.from_run(vars(plan.run))


def publish_run(store: Store, outcome: RunOutcome, out: Path, *, formats: Sequence[str], gates: Gates,
                header: str | None = None, hints: Sequence[str] = (),
                summary: Mapping[str, Any] | None = None) -> tuple[bool, list[TargetStats]]:
    """Write a finished run's reports, print its summary and apply the gates (all in SQL).

    ``summary`` (the run's :func:`~evalhydra.analysis.runsummary.run_summary`) names the targets'
    judges, sparing the reports and the summary a pass over the results each.

    Returns:
        Whether a gate failed, and the per-target stats of the summary.
    """
    totals: list[Totals] = []  # the reports' per-target totals, which the summary reads too
    write_run_reports(store, [outcome.run_id], out, formats=formats, summary=summary, on_totals=totals.append)
    stats = print_run_summary(store, outcome, out, header=header, hints=hints, pass_hat_k=gates.pass_hat_k,
                              judges=gates.judged or None, summary=summary, totals=next(iter(totals), None))
    failing = run_gate(store, [outcome.run_id], gates, stats=stats) if gates.active else []
    if gates.active:  # the verdict joins the run's summary.md and the CI's step summary
        add_gate_verdict(out, failing, failing_cases(store, [outcome.run_id], limit=10) if failing else [])
    append_step_summary(out)
    return bool(failing), stats


def add_gate_verdict(out: Path, failing: Sequence[GateFailure],
                     cases: Sequence[Mapping[str, Any]]) -> None:
    """Append the gates' verdict to the run's ``summary.md`` (when that format was written)."""
    summary = out / "summary.md"
    if summary.exists():
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(gate_verdict_md(failing, cases))


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
