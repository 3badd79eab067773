"""After a run: the one-line fixes for what went wrong, and whether the run measured anything.

A run *could not measure* (exit 3) when an eval × target has no scored cell
(every cell an infrastructure error) or when more than ``run.max_error_rate``
of its cells errored: a pass rate computed from what is left would mislead a
CI gate.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.targetstats import TargetStats
from evalhydra.analysis.wire_symptoms import SYMPTOMS, wire_symptoms
from evalhydra.core.envfiles import env_source
from evalhydra.core.values import ErrorKind
from evalhydra.plan.cells import endpoint_of
from evalhydra.plan.model import RunPlan
from evalhydra.reports.summary import plural
from evalhydra.store.db import Store
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["fix_hints", "unmeasured"]


def fix_hints(plan: RunPlan, store: Store, run_id: str) -> list[str]:
    """One line per kind of infrastructure error this run stored, naming the fix."""
    counts = _error_counts(store, run_id)
    hints = []
    svc = plan.service
    if counts.get("connect_error"):
        where = endpoint_of(svc) or "the built-in mock"
        origin = f" (the URL is {plan.url_origin})" if endpoint_of(svc) and plan.url_origin else ""
        hints.append(f"service '{svc.name}': nothing answered at {where}{origin} ({counts['connect_error']} "
                     "cells); start the server or fix service.base_url, then run again.")
    if counts.get("401"):
        hints.append(_unauthorized(plan, counts["401"]))
    if counts.get("rate_limited"):
        hints.append(f"{counts['rate_limited']} cells were rate limited (429); set service.rate_limit.rpm "
                     "or lower run.concurrency, then run again.")
    if counts.get(ErrorKind.ENDPOINT_SILENT):
        hints.append(f"service '{svc.name}': the server accepted connections but never replied; check its "
                     "log (a hung worker, a model still loading) and that it answers one request "
                     "(evalhydra check with the same overrides), then run again.")
    elif counts.get("timeout"):
        hints.append(f"{counts['timeout']} cells timed out (service.timeout_ms={svc.timeout_ms}); "
                     "raise it or lower run.concurrency.")
    if svc.kind == "openai" and any(ev.loop is not None for ev in plan.evals):
        hints += _wire_hint(plan, store, run_id)
    return hints


def _wire_hint(plan: RunPlan, store: Store, run_id: str) -> list[str]:
    """A line when the run's tool loops met a known server fault in tool calling, naming the probe."""
    found = wire_symptoms(store.conn, run_id)
    if not found:
        return []
    seen = "; ".join(f"{SYMPTOMS[name][0]}: {plural(cells, 'cell')}" for name, cells in found.items())
    return [f"service '{plan.service.name}': its replies showed known server faults in tool calling ({seen});"
            f" run evalhydra probe tools service={plan.service.name} to see which checks the server fails."]


def unmeasured(stats: Sequence[TargetStats], max_error_rate: float) -> list[str]:
    """Why the run could not measure (empty when it could): each target with no scored
    cell, and the run's error share when it is above ``max_error_rate``."""
    empty: dict[tuple[str, str | None], list[TargetStats]] = {}
    for s in stats:
        if s.n and not s.scored:
            empty.setdefault((s.service, s.model), []).append(s)
    reasons = []
    for (service, model), group in empty.items():
        errors, n = sum(s.errors for s in group), sum(s.n for s in group)
        where = group[0].eval if len(group) == 1 else f"{len(group)} evals"
        reasons.append(f"{where} on {service}/{model}: no scored cell ({errors} of {n} errored)")
    total = sum(s.n for s in stats)
    errors = sum(s.errors for s in stats)
    if total and not reasons and errors / total > max_error_rate:
        reasons.append(f"{errors} of {total} cells are infrastructure errors "
                       f"({errors / total:.0%} > run.max_error_rate={max_error_rate:g})")
    return reasons


def _unauthorized(plan: RunPlan, n: int) -> str:
    svc = plan.service
    env = svc.api_key_env
    if env and not os.environ.get(env):
        return (f"service '{svc.name}': {n} cells got 401 Unauthorized and ${env} is not set "
                f"(nor in a .env); export {env}=<key> or add it to the project's .env.")
    if env:
        return (f"service '{svc.name}': {n} cells got 401 Unauthorized; the endpoint rejected "
                f"the key in ${env} (from {env_source(env)}).")
    return (f"service '{svc.name}': {n} cells got 401 Unauthorized; set service.api_key_env to the variable "
            "holding the key.")


def _error_counts(store: Store, run_id: str) -> dict[str, int]:
    """Infrastructure errors of the cells this run sent, by error kind (and ``"401"``)."""
    sel = select_runs(store.conn, [run_id])
    sql = (f"select error_kind, status_code, count(*) from {sel.table} "
           f"where ({sel.where}) and {INFRA_ERROR_SQL} and run_id = ? group by 1, 2")
    counts: dict[str, int] = {}
    for kind, status, n in store.conn.execute(sql, [*sel.params, run_id]):
        key = "401" if status == 401 else str(kind)
        counts[key] = counts.get(key, 0) + int(n)
    return counts
