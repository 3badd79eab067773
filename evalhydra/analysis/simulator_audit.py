"""The simulator audit: which conversations a person reads, and each agent's pass rate corrected
for the simulated user's errors.

The queue holds every conversation of the runs (distinct by eval, case and transcript) that
scored, in a fixed order: failures and passes each in a random order fixed by the runs, then
three failures for every pass while both last. Any prefix of the queue therefore audits
failures first (a simulator's errors mostly turn would-be passes into failures) with a quarter
of its labels on passes (a leaked answer can make a pass that is not the agent's), the
allocation :func:`evalhydra.stats.simulator.audit_allocation` describes. Each stratum in its
own random order makes the audited ones a random sample of it, which the correction needs.

The correction (:func:`simulator_corrections`) counts cells, per eval and target: passes and
failures, and of those audited, how many the simulator broke; the estimator and its interval
are :func:`evalhydra.stats.simulator.corrected_for_simulator`'s, with the run's case-clustered
variance, and pass^k's (k = 2 up to the fewest conversations of a case, at most
:data:`~evalhydra.analysis.aggregate.MAX_K`) :func:`evalhydra.stats.simulator_passk.corrected_pass_hat_k`'s.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalhydra.analysis.aggregate import MAX_K
from evalhydra.analysis.queues import next_pending
from evalhydra.stats.clustered import rate_variance
from evalhydra.stats.simulator import corrected_for_simulator
from evalhydra.stats.simulator_passk import PASS_HAT_K_METHOD, corrected_pass_hat_k
from evalhydra.store.audits import audits_by_transcript, transcript_sha256
from evalhydra.store.rows import infra_error_sql

__all__ = ["AuditItem", "audit_queue", "has_audits", "next_to_audit", "simulator_corrections"]

_CONVERSATIONS_SQL = f"""select r.eval_id, r.service_name, r.model, r.case_id, r.passed,
  json_extract(r.details, '$.trajectory.transcript')
from run_cells rc join results r on r.cell_key = rc.cell_key and r.run_id = rc.result_run_id
where rc.run_id in ({{marks}}) and r.details like '%"simulator_digest"%' and not {infra_error_sql("r.")}
order by r.eval_id, r.case_id, r.run_index"""
#: Failures queued for each pass while both strata last.
FAILURES_PER_PASS = 3


@dataclass(frozen=True)
class AuditItem:
    """One conversation to audit: its place in the queue and whether the agent passed."""

    position: int
    eval_id: str
    case_id: str
    transcript_sha256: str
    passed: bool


def _conversations(conn: sqlite3.Connection, run_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """Each scored conversation cell: (eval, service, model, case, passed, transcript hash)."""
    sql = _CONVERSATIONS_SQL.format(marks=", ".join("?" * len(run_ids)))
    rows = conn.execute(sql, list(run_ids))
    return [(e, s, m, c, bool(p), transcript_sha256(t)) for e, s, m, c, p, t in rows]


def _order(run_ids: Sequence[str], item: tuple[str, str, str]) -> str:
    return hashlib.sha256("\0".join(["audit", *run_ids, *item]).encode("utf-8", "surrogatepass")).hexdigest()


def audit_queue(conn: sqlite3.Connection, run_ids: Sequence[str]) -> list[AuditItem]:
    """Every scored conversation of the runs, in the queue's order (see the module docstring)."""
    verdicts: dict[tuple[str, str, str], bool] = {}
    for eval_id, _, _, case_id, passed, digest in _conversations(conn, run_ids):
        verdicts.setdefault((eval_id, case_id, digest), passed)
    failures = sorted((k for k, v in verdicts.items() if not v), key=lambda k: _order(run_ids, k))
    passes = sorted((k for k, v in verdicts.items() if v), key=lambda k: _order(run_ids, k))
    placed: list[tuple[str, str, str]] = []
    while failures or passes:
        placed += failures[:FAILURES_PER_PASS] + passes[:1]
        failures, passes = failures[FAILURES_PER_PASS:], passes[1:]
    return [AuditItem(i, *item, passed=verdicts[item]) for i, item in enumerate(placed)]


def next_to_audit(conn: sqlite3.Connection, run_ids: Sequence[str],
                  after: int = -1) -> tuple[AuditItem | None, int, int]:
    """The first unaudited conversation past ``after``, how many of the queue are audited, its size."""
    return next_pending(audit_queue(conn, run_ids), audits_by_transcript(conn),
                        lambda q: (q.eval_id, q.case_id, q.transcript_sha256), after)


def has_audits(conn: sqlite3.Connection) -> bool:
    """Whether anyone audited a simulated user in this store (a store before migration 23: no)."""
    try:
        return conn.execute("select exists (select 1 from simulator_audits)").fetchone()[0] == 1
    except sqlite3.OperationalError:
        return False


def simulator_corrections(conn: sqlite3.Connection, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per eval and target with conversations: the raw pass rate, the audit's counts and kinds,
    and the pass rate corrected for the simulator's errors with its 95 % interval."""
    done = audits_by_transcript(conn)
    groups: dict[tuple[str, str, str], list[tuple[str, bool, tuple[bool, str | None] | None]]] = {}
    for eval_id, service, model, case_id, passed, digest in _conversations(conn, run_ids):
        groups.setdefault((eval_id, service, model), []).append(
            (case_id, passed, done.get((eval_id, case_id, digest))))
    return [_corrected(key, cells) for key, cells in sorted(groups.items())]


def _corrected(key: tuple[str, str, str],
               cells: list[tuple[str, bool, tuple[bool, str | None] | None]]) -> dict[str, Any]:
    passes = sum(1 for _, passed, _ in cells if passed)
    audited = {True: [a for _, p, a in cells if p and a is not None],
               False: [a for _, p, a in cells if not p and a is not None]}
    broken = {side: sum(1 for b, _ in found if b) for side, found in audited.items()}
    hist = _case_histogram(cells)
    audit = (len(audited[True]), broken[True], len(audited[False]), broken[False])
    fixed = corrected_for_simulator(passes, len(cells) - passes, *audit, raw_variance=rate_variance(hist))
    kinds = Counter(kind for found in audited.values() for b, kind in found if b and kind)
    return {"eval_id": key[0], "service_name": key[1], "model": key[2], "n": len(cells), "passed": passes,
            "audited_passes": len(audited[True]), "broken_passes": broken[True],
            "audited_failures": len(audited[False]), "broken_failures": broken[False],
            "kinds": dict(sorted(kinds.items())), "raw_pass_rate": fixed.raw,
            "corrected_pass_rate": fixed.estimate, "corrected_ci_low": fixed.low,
            "corrected_ci_high": fixed.high, "method": fixed.method, "problem": fixed.problem,
            "pass_hat_k": _pass_hat_ks(hist, audit), "pass_hat_k_method": PASS_HAT_K_METHOD}


def _case_histogram(cells: list[tuple[str, bool, Any]]) -> Counter[tuple[int, int]]:
    """How many cases ran n conversations and passed c, by ``(n, c)``."""
    per_case: dict[str, list[int]] = {}
    for case_id, passed, _ in cells:
        counts = per_case.setdefault(case_id, [0, 0])
        counts[0] += 1
        counts[1] += passed
    return Counter((scored, ok) for scored, ok in per_case.values())


def _pass_hat_ks(hist: Counter[tuple[int, int]], audit: tuple[int, int, int, int]) -> dict[str, Any]:
    """pass^k corrected for the simulator, k = 2..min(trials, MAX_K), by k."""
    top = min(MAX_K, min((n for n, _ in hist), default=0))
    out = {}
    for k in range(2, top + 1):
        fixed = corrected_pass_hat_k(hist, k, *audit)
        out[str(k)] = {"raw": fixed.raw, "corrected": fixed.estimate, "ci_low": fixed.low,
                       "ci_high": fixed.high, "problem": fixed.problem}
    return out
