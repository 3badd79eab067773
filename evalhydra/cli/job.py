"""One job, end to end: plan → run → store → reports → summary → exit code.

Everything here is a plain function of a composed config, so tests call
:func:`run_config` directly (with :func:`evalhydra.config.compose.compose_config`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import trio
from omegaconf import DictConfig
from tabulate import tabulate

from evalhydra.config.defaults import DEFAULT_REPORT_FORMATS
from evalhydra.errors import EvalHydraError
from evalhydra.execute.progress import Progress
from evalhydra.execute.runner import RunOutcome, execute
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import count_cells, iter_plan_cases
from evalhydra.plan.model import RunPlan
from evalhydra.reports.summary import print_run_summary, run_gate
from evalhydra.reports.writer import write_run_reports
from evalhydra.services.openai_compat import missing_api_key_warning
from evalhydra.store.db import Store, open_store

__all__ = ["EXIT_GATE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "publish_run", "run_config", "run_plan"]

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def run_config(
    cfg: DictConfig,
    *,
    overrides: Sequence[str] = (),
    output_dir: str | None = None,
    job_num: int | None = None,
) -> int:
    """Run a composed config; print the summary; return the process exit code.

    User-fixable problems are printed as one ``error:`` message (no traceback)
    and give exit code 2.
    """
    try:
        plan = build_plan(cfg, overrides)
        if job_num is not None and output_dir:  # a sweep job: its runs row names the sweep
            plan = replace(plan, sweep_dir=str(Path(output_dir).resolve().parent))
        return run_plan(plan, output_dir=Path(output_dir) if output_dir else None)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def run_plan(plan: RunPlan, *, output_dir: Path | None = None) -> int:
    """Execute a plan and write its reports; return the exit code."""
    _warn_missing_keys(plan)
    total = count_cells(plan)
    if plan.run.dry_run:
        print_dry_run(plan, total)
        return EXIT_OK
    store = open_store(plan.store_path)
    try:
        progress = Progress(total, enabled=plan.run.progress, label=f"[{plan.service.name}] ")
        outcome = trio.run(partial(execute, plan, store, total=total, progress=progress))
        return _finish(plan, store, outcome, output_dir)
    finally:
        store.close()


def _finish(plan: RunPlan, store: Store, outcome: RunOutcome, output_dir: Path | None) -> int:
    """Write the run's reports, print the summary, and turn gates into an exit code."""
    out = output_dir or plan.store_path.parent / "runs" / outcome.run_id
    formats = plan.config.get("report") or DEFAULT_REPORT_FORMATS
    gate_failed = publish_run(store, outcome, out, formats=formats, fail_under=plan.run.fail_under,
                              per_eval=plan.run.fail_under_per_eval)
    if outcome.interrupted:
        print(f"interrupted: {outcome.executed} results stored; rerun the same command to resume.",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if outcome.budget_exhausted:
        print(f"stopped scheduling: run.max_cost_usd={plan.run.max_cost_usd} reached.", file=sys.stderr)
    return EXIT_GATE if gate_failed else EXIT_OK


def publish_run(store: Store, outcome: RunOutcome, out: Path, *, formats: Sequence[str],
                fail_under: float | None, per_eval: Mapping[str, float] | None) -> bool:
    """Write a finished run's reports, print its summary and apply the gates (all in SQL).

    Returns:
        True when a pass rate is below ``fail_under`` or its per-eval threshold.
    """
    write_run_reports(store, [outcome.run_id], out, formats=formats)
    stats = print_run_summary(store, outcome, out)
    thresholds = dict(per_eval or {})
    if fail_under is None and not thresholds:
        return False
    return bool(run_gate(store, [outcome.run_id], fail_under, thresholds, stats=stats))


def print_dry_run(plan: RunPlan, total: int) -> None:
    """Print the planned cells per eval × service × model, with a rough token/cost estimate.

    Datasets are streamed; input tokens are estimated at four characters each.
    """
    rows = []
    cost = 0.0
    pricing = plan.service.pricing
    for ev in plan.evals:
        n_cases = chars = 0
        for case in iter_plan_cases(plan, ev):
            n_cases += 1
            chars += len(str(getattr(case, "input", "") or ""))
        tokens = (chars // 4 + 16 * n_cases) * ev.trials
        est = (tokens * pricing.input_per_mtok + 64 * n_cases * ev.trials * pricing.output_per_mtok) / 1e6
        cost += est
        rows.append([ev.id, plan.service.name, plan.model, n_cases, ev.trials, n_cases * ev.trials,
                     tokens, f"${est:.4f}"])
    print(tabulate(rows, headers=["eval", "service", "model", "cases", "trials", "cells",
                                  "est. input tokens", "est. cost"]))
    print(f"\ndry run: {total} cells planned, estimated cost ${cost:.4f}; no call was made.")


def _warn_missing_keys(plan: RunPlan) -> None:
    """Warn once per service whose ``api_key_env`` variable is unset (the seed does not fail)."""
    services = {svc.name: svc for svc in [plan.service, *plan.judges.values()] if svc.kind == "openai"}
    for svc in services.values():
        warning = missing_api_key_warning(svc)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
