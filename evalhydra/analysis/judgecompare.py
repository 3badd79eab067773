"""``compare --judge-corrected``: the paired difference of pass rates corrected for each side's judge.

When a judge scored an eval's results, its errors move the pass rate: a lenient judge raises it, a
strict one lowers it, and a change of judge alone can look like a regression. Each side's judge is
calibrated on people's labels (:mod:`evalhydra.analysis.judges`); each shared case's pass fractions
are corrected by their side's judge, and the difference gets an interval carrying both the cases'
and the labels' variance (:func:`evalhydra.stats.judge.corrected_difference`). The per-eval and
pooled p-values are Holm-adjusted together, as the raw ones are.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evalhydra.analysis.aggregate import Target
from evalhydra.analysis.compare import Side, adjust_comparison, by_case_sql
from evalhydra.analysis.judges import (
    JudgeCalibration,
    JudgeKey,
    Settings,
    calibrations,
    judge_name,
    judges_in_summary,
    judges_of,
)
from evalhydra.analysis.runsummary import saved_summaries
from evalhydra.analysis.selection import Selection
from evalhydra.stats.judge import JudgedCases, corrected_difference

__all__ = ["JudgedSide", "SavedRun", "add_judge_corrected"]

_SHARED_SQL = """with b as materialized ({base}), x as materialized ({cand})
select b.g, b.e, 1.0 * b.ok / b.scored, 1.0 * x.ok / x.scored from b join x
  on x.g = b.g and x.e = b.e and x.c = b.c where b.scored > 0 and x.scored > 0"""

Eval = tuple[str, str]


@dataclass(frozen=True)
class SavedRun:
    """A side that is one finished run (narrowed to a service, a model, some evals) whose saved
    summary names its judges."""

    run_id: str
    service: str | None = None
    model: str | None = None
    evals: tuple[str, ...] = ()

    def holds(self, target: Mapping[str, Any]) -> bool:
        """Whether a target of the run's summary is on this side."""
        return ((self.service is None or target["service"] == self.service)
                and (self.model is None or target["model"] == self.model)
                and (not self.evals or target["eval"] in self.evals))


@dataclass(frozen=True)
class JudgedSide:
    """One side of a judge-corrected comparison: the condition on ``results``, the one its per-case
    figures are read by (the run's saved fractions when they hold), and, for one finished run,
    where its judges are named without a pass over its results."""

    results: Side
    cases: Side
    saved: SavedRun | None = None


def _judges(conn: sqlite3.Connection, side: JudgedSide,
            settings: Settings) -> dict[Eval, list[JudgeKey | None]]:
    """Per eval of a side, the judges of its scored results (None: results no judge scored): from
    the run's saved summary when it names them, else from a pass over the side's results."""
    by_target = _saved_judges(conn, side.saved, settings) if side.saved else None
    if by_target is None:
        by_target = judges_of(conn, Selection((), side.results.where, side.results.params), settings)
    out: dict[Eval, list[JudgeKey | None]] = {}
    for (g, e, _, _), found in by_target.items():
        for key in found:
            if key not in out.setdefault((g, e), []):
                out[(g, e)].append(key)
    return out


def _saved_judges(conn: sqlite3.Connection, saved: SavedRun,
                  settings: Settings) -> dict[Target, dict[JudgeKey | None, int]] | None:
    """:func:`~evalhydra.analysis.judges.judges_of` of the side from the run's saved summary (None
    without one that still holds and names them)."""
    summary = saved_summaries(conn, [saved.run_id]).get(saved.run_id)
    if summary is None:
        return None
    return judges_in_summary({"targets": [t for t in summary["targets"] if saved.holds(t)]}, settings)


def _shared(conn: sqlite3.Connection, base: Side, cand: Side) -> dict[Eval, list[tuple[float, float]]]:
    out: dict[Eval, list[tuple[float, float]]] = {}
    sql = _SHARED_SQL.format(base=by_case_sql(base), cand=by_case_sql(cand))
    for g, e, fb, fx in conn.execute(sql, [*base.params, *cand.params]):
        out.setdefault((g, e), []).append((fb, fx))
    return out


def _one_judge(found: Sequence[JudgeKey | None], side: str) -> tuple[JudgeKey | None, str | None]:
    if None in found:
        return None, f"the {side}'s results were not all scored by a judge"
    if len(found) != 1:
        return None, f"the {side} was scored by {len(found)} judges (or matcher settings)"
    return found[0], None


def _group(key: Eval, fractions: list[tuple[float, float]], judges: tuple[Mapping[Eval, list[Any]], ...],
           found: Mapping[JudgeKey, JudgeCalibration]) -> tuple[JudgedCases | None, dict[str, Any]]:
    """One eval's cases with both judges' calibrations, or the block saying why it cannot be corrected."""
    (base, why_b), (cand, why_c) = (_one_judge(judges[0].get(key, []), "baseline"),
                                    _one_judge(judges[1].get(key, []), "candidate"))
    block: dict[str, Any] = {
        "baseline_judge": judge_name(base) if base else None,
        "candidate_judge": judge_name(cand) if cand else None,
        "baseline_labels": found[base].agreement.n if base else 0,
        "candidate_labels": found[cand].agreement.n if cand else 0}
    if base is None or cand is None:
        return None, {**block, "problem": why_b or why_c}
    return (fractions, found[base].agreement, found[cand].agreement, base == cand), block


def _pooled_judges(blocks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The pooled row's judges per side: the one name, or "N judges: a, b", and the labels of all
    (a judge is an eval's, so each eval's labels count)."""
    out: dict[str, Any] = {}
    for side in ("baseline", "candidate"):
        names = sorted({b[f"{side}_judge"] for b in blocks if b.get(f"{side}_judge")})
        out[f"{side}_judge"] = (names[0] if len(names) == 1 else
                                f"{len(names)} judges: {', '.join(names)}" if names else None)
        out[f"{side}_labels"] = sum(b.get(f"{side}_labels") or 0 for b in blocks)
    return out


def add_judge_corrected(conn: sqlite3.Connection, base: JudgedSide, cand: JudgedSide,
                        rows: Sequence[dict[str, Any]], overall: dict[str, Any]) -> None:
    """Add a ``judge_corrected`` block to each comparison row and the pooled one: the corrected
    difference, its interval, p-value (Holm-adjusted) and verdict, each side's judge and labels, or
    the ``problem`` that prevents the correction."""
    settings = Settings(conn)
    judges = (_judges(conn, base, settings), _judges(conn, cand, settings))
    keys = {k for side in judges for found in side.values() for k in found if k is not None}
    found = calibrations(conn, keys, resamples=0, settings=settings)
    shared = _shared(conn, base.cases, cand.cases)
    groups = []
    for row in rows:
        key = (row["group"], row["eval_id"])
        group, block = _group(key, shared.get(key, []), judges, found)
        if group is not None:
            groups.append(group)
            block.update(asdict(corrected_difference([group])))
        row["judge_corrected"] = {**block, "p_holm": None, "verdict": None}
    pooled = asdict(corrected_difference(groups)) if len(groups) == len(rows) else {
        "problem": "an eval cannot be corrected"}
    overall["judge_corrected"] = {**_pooled_judges([r["judge_corrected"] for r in rows]), **pooled,
                                  "p_holm": None, "verdict": None}
    adjust_comparison(rows, overall, "judge_corrected")
