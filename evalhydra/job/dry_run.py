"""``run.dry_run=true``: the cells a run would send, with a rough token and cost estimate."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from tabulate import tabulate

from evalhydra.plan.cells import planned_cells
from evalhydra.plan.model import RunPlan
from evalhydra.store.db import open_store

__all__ = ["print_dry_run"]


def print_dry_run(plan: RunPlan) -> None:
    """Print, per eval, the cells that would be sent (cells already stored are not), with
    estimated input tokens (four characters each) and cost. Datasets are streamed."""
    done = _stored_keys(plan)
    pending: dict[str, list[int]] = {ev.id: [0, 0, 0] for ev in plan.evals}  # planned, to send, chars
    stored = 0
    for job in planned_cells(plan):
        pending[job.eval.id][0] += 1
        if job.key in done:
            stored += 1
        else:
            counts = pending[job.eval.id]
            counts[1] += 1
            counts[2] += len(str(getattr(job.case, "input", "") or ""))
    pricing = plan.service.pricing
    batched = plan.service.batch.enabled
    share = pricing.batch_discount if batched else 1.0  # batch jobs are priced at a share of online
    rows, total, cost = [], 0, 0.0
    for ev in plan.evals:
        planned, cells, chars = pending[ev.id]
        tokens = chars // 4 + 16 * cells
        est = share * (tokens * pricing.input_per_mtok + 64 * cells * pricing.output_per_mtok) / 1e6
        total, cost = total + cells, cost + est
        rows.append([ev.id, plan.service.name, plan.model, planned // ev.trials, ev.trials, cells, tokens,
                     f"${est:.4f}"])
    print(tabulate(rows, headers=["eval", "service", "model", "cases", "trials", "cells to send",
                                  "est. input tokens", "est. cost"]))
    how = f" in batch jobs at {share:.0%} of the online price" if batched else ""
    print(f"\ndry run: {total} cells would be sent{how} ({stored} already stored), estimated cost "
          f"${cost:.4f}; no call was made.")


def _stored_keys(plan: RunPlan) -> Collection[str]:
    """Keys a real run would skip (read-only; an absent store has none)."""
    if not Path(plan.store_path).exists():
        return ()
    store = open_store(plan.store_path, read_only=True)
    try:
        return store.done_versions([e.id for e in plan.evals], plan.service.name,
                                   retry_errors=plan.resend_errors, client_errors=plan.resend_client_errors)
    finally:
        store.close()
