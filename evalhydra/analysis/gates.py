"""A run's CI gates: the minimum pass rates, the per-case consistency gate and the judge gates,
and the targets under them (the terminal summary prints them; the exit code is 1 when any)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.targetstats import TargetStats
from evalhydra.store.db import Store

__all__ = ["GateFailure", "Gates", "failing_stats", "threshold_for", "top_fix"]


def threshold_for(stat: TargetStats, fail_under: float | None,
                  per_eval: Mapping[str, float] | None) -> float | None:
    """The minimum pass rate of one eval: its id's, else its group's, else ``fail_under``."""
    per_eval = per_eval or {}
    for key in (stat.eval, stat.group):
        if key is not None and key in per_eval:
            return float(per_eval[key])
    return fail_under


@dataclass(frozen=True)
class Gates:
    """A run's CI gates: the minimum pass rates and the per-case consistency gate.

    Attributes:
        fail_under: Minimum pass rate of every target (``run.fail_under``).
        per_eval: Minimum pass rate per eval id or group (``run.fail_under_per_eval``).
        pass_hat_k_under: Minimum pass^k (``run.fail_under_pass_hat_k``): of a random
            case, the chance that k trials all pass.
        pass_hat_k: k of that gate (``run.pass_hat_k``; default: the fewest trials of a case).
        require_judge_labels: A target a judge scored fails unless the judge has at least this
            many labelled outputs (``run.require_judge_labels``).
        min_judge_kappa: ... and unless its Cohen's κ with the labels is at least this
            (``run.min_judge_kappa``).
    """

    fail_under: float | None = None
    per_eval: Mapping[str, float] = field(default_factory=dict)
    pass_hat_k_under: float | None = None
    pass_hat_k: int | None = None
    require_judge_labels: int | None = None
    min_judge_kappa: float | None = None

    @classmethod
    def from_run(cls, run: Mapping[str, Any]) -> Gates:
        """The gates of a run's ``run`` section (a config mapping, as stored or composed)."""
        return cls(run.get("fail_under"), dict(run.get("fail_under_per_eval") or {}),
                   run.get("fail_under_pass_hat_k"), run.get("pass_hat_k"), run.get("require_judge_labels"),
                   run.get("min_judge_kappa"))

    @property
    def judged(self) -> bool:
        """Whether a gate asks about the judges."""
        return self.require_judge_labels is not None or self.min_judge_kappa is not None

    @property
    def active(self) -> bool:
        """Whether any gate is set."""
        return (self.fail_under is not None or bool(self.per_eval) or self.pass_hat_k_under is not None
                or self.judged)


@dataclass(frozen=True, slots=True)
class GateFailure:
    """A target under one gate: what was measured (``metric``, ``value``; None when it could not
    be), the gate's ``threshold``, and the format both are shown in (``shape``)."""

    stat: TargetStats
    metric: str
    value: float | None
    threshold: float
    shape: str = ".1%"


def failing_stats(stats: Iterable[TargetStats], gates: Gates) -> list[GateFailure]:
    """Targets under a gate, worst first.

    A target with no scored cell has no pass rate: it is the "could not measure"
    exit, not a failed gate.
    """
    failing = []
    for s in stats:
        if not s.scored:
            continue
        limit = threshold_for(s, gates.fail_under, gates.per_eval)
        if limit is not None and not s.pass_rate >= limit:  # written so that a NaN fails
            failing.append(GateFailure(s, "pass rate", s.pass_rate, limit))
        hat = s.pass_hat_k
        if gates.pass_hat_k_under is not None and hat is not None and not hat >= gates.pass_hat_k_under:
            failing.append(GateFailure(s, f"pass^{s.k}", hat, gates.pass_hat_k_under))
        failing += _judge_failures(s, gates)
    return sorted(failing, key=lambda f: (f.value is not None, (f.value or 0) - f.threshold,
                                          f.stat.eval, f.metric))


def _judge_failures(stat: TargetStats, gates: Gates) -> list[GateFailure]:
    """A judged target's judge gates: too few labels, or too little agreement with them."""
    judged = stat.judged
    if judged is None:
        return []
    out = []
    who = judged.judge or "several judges"
    if gates.require_judge_labels is not None and judged.judge_labels < gates.require_judge_labels:
        out.append(GateFailure(stat, f"judge labels ({who})", judged.judge_labels, gates.require_judge_labels,
                               "d"))
    kappa = judged.judge_kappa
    if gates.min_judge_kappa is not None and not (kappa is not None and kappa >= gates.min_judge_kappa):
        out.append(GateFailure(stat, f"judge kappa ({who})", kappa, gates.min_judge_kappa, ".3f"))
    return out


def top_fix(store: Store, run_ids: Sequence[str]) -> str | None:
    """The suggested fix the runs' failed results give most often (None without one)."""
    sel = select_runs(store.conn, run_ids)
    row = store.conn.execute(
        f"select suggested_fix, count(*) as n from {sel.table} where ({sel.where}) and not passed"
        " and coalesce(suggested_fix, '') != '' group by suggested_fix order by n desc,"
        " suggested_fix limit 1", sel.params).fetchone()
    return row[0] if row else None
