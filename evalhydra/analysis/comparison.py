"""``evalhydra compare``'s figures: two runs, services or models, paired case by case
(:mod:`evalhydra.reports.comparison` prints them).

A *target* is ``[RUN][@SERVICE[:MODEL]]``:

* ``RUN`` (an id, a unique prefix or ``latest``): the cells of that run;
* ``@SERVICE`` / ``@SERVICE:MODEL`` narrows to a service (and model; only the
  first ``:`` splits, so ``@ollama:llama3:8b`` is service ``ollama``, model
  ``llama3:8b``);
* without ``RUN``, the latest stored result of every (eval, service, model,
  case, trial) of that service, from any run.

Both sides are paired on (group, eval, case). Results with an infrastructure
error (HTTP failure, timeout, agent ERROR/TIMEOUT) are left out, counted
apart: they are neither passes nor failures. Per eval (and for all evals
pooled) the output gives both pass rates, zig_eval's delta interval, the
mean over shared cases of the difference of the pass fractions with its
case-clustered paired 95% interval (with one trial per case, Newcombe's) and
one-sided p-value, the p-value adjusted by Holm
over every eval and the pooled row, the cases that regressed or improved,
and the (case, trial) pairs whose verdict flipped on the same output. A
regression is a lower candidate whose Holm-adjusted one-sided p-value (the
exact sign-flip test on the per-case differences) is below 0.05. When the
comparison cannot detect a drop of ``--min-detectable`` at 80% power, it says
so and how many cases would; with fewer than five cases no result can be
significant, and it says that instead.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalhydra.analysis.compare import (
    EvalPairing,
    Side,
    adjust_comparison,
    comparison_row,
    is_regression,
    paired_by_eval,
    pooled,
)
from evalhydra.analysis.judgecompare import JudgedSide, SavedRun, add_judge_corrected
from evalhydra.analysis.selection import versions_of_runs
from evalhydra.analysis.simulators import simulator_changes
from evalhydra.analysis.ttft import paired_first_token
from evalhydra.core.errors import EvalHydraError
from evalhydra.stats.clustered import CaseDiffs
from evalhydra.stats.power import (
    DEFAULT_POWER,
    MIN_CASES,
    cases_needed,
    from_differences,
    min_detectable,
    noise_floor,
)
from evalhydra.store.fractions import fractions_valid
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["Comparison", "Target", "block_of", "compare", "in_points", "parse_target", "precision",
           "regressions", "side_of"]

_LATEST = """rowid in (select rid from (select rowid as rid, row_number() over (
    partition by eval_id, service_name, model, case_id, run_index
    order by evaluated_at desc, run_id desc, cell_key desc) as recency from results {where})
  where recency = 1)"""


@dataclass(frozen=True)
class Target:
    """One side as the user wrote it, with run ids resolved."""

    label: str
    runs: tuple[str, ...] = ()
    service: str | None = None
    model: str | None = None


def parse_target(text: str) -> tuple[str, str | None, str | None]:
    """``RUN@SERVICE:MODEL`` → ``(run, service, model)`` (empty parts are "" or None)."""
    run, _, rest = text.partition("@")
    if not rest:
        return run, None, None
    service, _, model = rest.partition(":")
    return run, service or None, model or None


def side_of(target: Target, evals: Sequence[str], conn: sqlite3.Connection | None = None) -> Side:
    """The condition on ``results`` that selects a target (and, if given, only these evals); with
    ``conn``, on the run's saved per-case fractions where they hold the same figures."""
    fast = _fractions_side(conn, target, evals) if conn is not None else None
    if fast is not None:
        return fast
    conds, params = _narrowed(target, evals)
    if target.runs:
        conds.insert(0, versions_of_runs(len(target.runs)))
        params = [*target.runs, *params]
        return Side(target.label, " and ".join(conds), tuple(params))
    inner = f"where {' and '.join(conds)}" if conds else ""
    return Side(target.label, _LATEST.format(where=inner), tuple(params))


def _judged_side(target: Target, evals: Sequence[str], cases: Side) -> JudgedSide:
    """A side for the judge correction: ``cases`` is the side the comparison read its cases by
    (a finished run's saved fractions, when they hold, and then its saved summary names its judges)."""
    saved = (SavedRun(target.runs[0], target.service, target.model, tuple(evals)) if cases.fractions
             else None)
    return JudgedSide(side_of(target, evals), cases, saved)


def _narrowed(target: Target, evals: Sequence[str]) -> tuple[list[str], list[Any]]:
    """The conditions (and parameters) of a target's service and model, and of ``evals``."""
    conds: list[str] = []
    params: list[Any] = []
    for column, value in (("service_name", target.service), ("model", target.model)):
        if value is not None:
            conds.append(f"{column} = ?")
            params.append(value)
    if evals:
        conds.append(f"eval_id in ({', '.join('?' * len(evals))})")
        params += list(evals)
    return conds, params


def _fractions_side(conn: sqlite3.Connection, target: Target, evals: Sequence[str]) -> Side | None:
    """The target as a condition on ``case_fractions``: for one finished run whose fractions still
    hold, when no case of the selection has several targets (whose trials would pool)."""
    if len(target.runs) != 1 or not fractions_valid(conn, target.runs[0]):
        return None
    conds, params = _narrowed(target, evals)
    where = " and ".join(["run_id = ?", *conds])
    params = [target.runs[0], *params]
    pooled_targets = conn.execute(f'select 1 from case_fractions where {where} group by "group", eval_id,'
                                  " case_id having count(*) > 1 limit 1", params).fetchone()
    return None if pooled_targets else Side(target.label, where, tuple(params), fractions=True)


@dataclass
class Comparison:
    """Per-eval comparison rows, the pooled row, and the sides' labels."""

    baseline: str
    candidate: str
    kind: str
    rows: list[dict[str, Any]]
    overall: dict[str, Any]
    errors: tuple[int, int] = (0, 0)  # infrastructure errors left out: baseline, candidate
    one_sided: dict[str, str] = field(default_factory=dict)  # eval id -> the side it did not run on
    precision: dict[str, Any] | None = None  # the pooled row's detectable drop (see :func:`precision`)
    diffs: CaseDiffs = field(default_factory=CaseDiffs)  # the pooled per-case differences
    first_token: dict[str, Any] | None = None  # paired time to first token (streamed answers only)
    judge_corrected: bool = False  # rows carry ``judge_corrected`` blocks, and verdicts follow them

    def to_json(self) -> dict[str, Any]:
        """The ``--format json`` document."""
        return {"baseline": self.baseline, "candidate": self.candidate, "target_kind": self.kind,
                "errors_left_out": {"baseline": self.errors[0], "candidate": self.errors[1]},
                "not_run_on": self.one_sided,
                # each row with "points": the table's numbers (percent, percentage points)
                "comparisons": [{**row, "points": in_points(row)} for row in self.rows],
                "overall": {**self.overall, "points": in_points(self.overall)},
                "precision": self.precision, "first_token": self.first_token,
                "judge_corrected": self.judge_corrected}


def _kind(base: Target, cand: Target) -> str:
    if base.service != cand.service:
        return "service"
    if base.model != cand.model:
        return "model"
    return "run"


def _errors(conn: sqlite3.Connection, side: Side) -> int:
    sql = (f"select coalesce(sum(results - scored), 0) from case_fractions where {side.where}"
           if side.fractions else f"select count(*) from results where ({side.where}) and {INFRA_ERROR_SQL}")
    return int(conn.execute(sql, side.params).fetchone()[0])


def compare(conn: sqlite3.Connection, base: Target, cand: Target, evals: Sequence[str] = (), *,
            min_detectable_drop: float = 0.05, judge_corrected: bool = False,
            allow_simulator_change: bool = False) -> Comparison:
    """Compare two targets; results with an infrastructure error are left out.

    Evals with results on one side only are listed in ``one_sided`` and left out
    of the rows and of the pooled statistics. The p-values of the per-eval rows
    and the pooled row are Holm-adjusted together (with one eval, the pooled row
    is that eval and is not counted twice).

    Args:
        conn: A connection to the store.
        base: The baseline.
        cand: The candidate.
        evals: Only these eval ids (default: all).
        min_detectable_drop: The drop (a fraction) the comparison should detect at 80% power.
        judge_corrected: Also compare the pass rates corrected for each side's judge
            (:mod:`evalhydra.analysis.judgecompare`); the verdicts then follow the corrected ones.
        allow_simulator_change: Compare conversations whose simulated users differ
            (:mod:`evalhydra.analysis.simulators`).

    Raises:
        EvalHydraError: If a side is empty or selects no results, or the sides' simulated users
            differ (unless ``allow_simulator_change``).
    """
    for name, target in (("baseline", base), ("candidate", cand)):
        if not (target.runs or target.service or target.model):
            raise EvalHydraError(f"The {name} {target.label!r} names no run, service or model.",
                                 "Give RUN (an id, a prefix or 'latest') and/or @SERVICE[:MODEL]; "
                                 "is a shell variable unset?")
    sides = (side_of(base, evals, conn), side_of(cand, evals, conn))
    if not allow_simulator_change:
        _refuse_simulator_change(conn, side_of(base, evals), side_of(cand, evals))
    errors = (_errors(conn, sides[0]), _errors(conn, sides[1]))
    pairings = paired_by_eval(conn, *sides, skip_errors=True)
    for name, target, total, err in (("baseline", base, sum(p.base_total for p in pairings), errors[0]),
                                     ("candidate", cand, sum(p.cand_total for p in pairings), errors[1])):
        if not total and not err:
            raise EvalHydraError(f"The {name} {target.label} selects no results.",
                                 "Check the run id, @service and :model (evalhydra runs lists runs).")
    kind = _kind(base, cand)
    one_sided = {p.eval_id: ("candidate" if p.base_total else "baseline")
                 for p in pairings if not (p.base_total and p.cand_total)}
    both = [p for p in pairings if p.eval_id not in one_sided]

    def row(p: EvalPairing) -> dict[str, Any]:
        service = base.service if kind == "model" else None
        return comparison_row(p, kind=kind, service_name=service, baseline=base.label,
                              candidate=cand.label)

    all_evals = pooled(both)
    rows, overall = [row(p) for p in both], row(all_evals)
    adjust_comparison(rows, overall)
    if judge_corrected:
        add_judge_corrected(conn, _judged_side(base, evals, sides[0]), _judged_side(cand, evals, sides[1]),
                            rows, overall)
    return Comparison(base.label, cand.label, kind, rows, overall, errors, one_sided,
                      precision(all_evals.diffs, overall.get("paired"), min_detectable_drop,
                                overall["baseline_pass_rate"]), all_evals.diffs,
                      paired_first_token(conn, *sides), judge_corrected)


def _refuse_simulator_change(conn: sqlite3.Connection, base: Side, cand: Side) -> None:
    changes = simulator_changes(conn, base, cand)
    if changes:
        raise EvalHydraError(f"The sides' simulated users differ ({changes[0]}"
                             + (f"; and {len(changes) - 1} more eval(s))" if len(changes) > 1 else ")")
                             + ": the difference would measure the simulator too.",
                             "Compare runs with the same simulator, or pass --allow-simulator-change.")


def precision(diffs: CaseDiffs, paired: dict[str, Any] | None, target: float,
              baseline_rate: float) -> dict[str, Any] | None:
    """The pooled comparison's detectable drop at 80% power, and the cases needed for ``target``.

    The spread of a case's difference is the observed one, but never less than the
    trial-to-trial noise a drop of ``target`` from ``baseline_rate`` would itself bring
    (:func:`~evalhydra.stats.power.noise_floor`): two identical runs of deterministic
    cases show no spread, yet cannot show a small drop either.

    Returns:
        ``{min_detectable, target, underpowered, reachable, cases, trials, cases_needed, power}``
        (``min_detectable`` None and ``reachable`` False with fewer than
        :data:`~evalhydra.stats.power.MIN_CASES` cases, which no drop makes significant), or None
        with no shared case.
    """
    if not paired or diffs.n_cases < 1:
        return None
    if diffs.n_cases < MIN_CASES:
        return {"min_detectable": None, "target": target, "underpowered": True, "reachable": False,
                "cases": diffs.n_cases, "trials": max(1, diffs.trials_max), "cases_needed": MIN_CASES,
                "power": DEFAULT_POWER}
    trials = max(1, diffs.trials_max)
    observed = from_differences(diffs)
    sd = max(observed.sd(trials) if observed else 0.0, noise_floor(baseline_rate, target).sd(trials))
    detectable = min_detectable(sd / math.sqrt(diffs.n_cases), diffs.n_cases - 1)
    return {"min_detectable": detectable, "target": target, "underpowered": detectable > target,
            "reachable": True, "cases": diffs.n_cases, "trials": trials,
            "cases_needed": cases_needed(sd, target), "power": DEFAULT_POWER}


def regressions(result: Comparison) -> list[dict[str, Any]]:
    """Rows (per eval, or pooled) where the candidate is significantly worse (Holm-adjusted); with
    judge correction, where the corrected difference is."""
    return [r for r in [*result.rows, result.overall] if is_regression(block_of(result, r))]


def block_of(result: Comparison, row: dict[str, Any]) -> dict[str, Any] | None:
    """The block a row's verdict follows: the judge-corrected one when asked for and defined, else
    the paired one (an eval no judge scored, or one that cannot be corrected, keeps its raw verdict)."""
    corrected = row.get("judge_corrected") if result.judge_corrected else None
    return corrected if corrected and corrected.get("verdict") else row["paired"]


def in_points(row: Mapping[str, Any]) -> dict[str, Any]:
    """A comparison row's rates in percent and its differences in percentage points, rounded to
    0.1 as the table shows them (``compare --format json`` carries the same numbers)."""
    paired = row.get("paired")

    def points(value: float) -> float:
        return round(100 * value, 1) + 0.0  # + 0.0: -0.0 reads 0.0

    shown: dict[str, Any] = {
        "baseline_pct": points(row["baseline_pass_rate"]),
        "candidate_pct": points(row["candidate_pass_rate"]), "delta_pp": points(row["delta_pass_rate"]),
        "delta_ci_pp": [points(row["delta_ci_low"]), points(row["delta_ci_high"])]}
    if paired:
        shown["paired_delta_pp"] = points(paired["difference"])
        shown["paired_ci_pp"] = [points(paired["ci_low"]), points(paired["ci_high"])]
    return shown
