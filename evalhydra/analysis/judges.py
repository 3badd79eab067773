"""Each judge of some runs measured against people's labels, and the pass rates it gave corrected.

A *judge* is an eval's judge service and model under one set of matcher settings (its rubric,
prompt, passing score…: the fingerprint each run keeps in ``runs.judges``; :data:`JudgeKey`). Its
calibration set is every labelled output (:mod:`evalhydra.store.labels`) it judged anywhere in the
store, each counted once with its newest verdict: labels made on one run calibrate the judge for
every later run. Self-consistency comes from outputs it judged more than once among the runs and
their rejudges. A target (eval × service × model) whose scored results one judge gave gets its raw
pass rate corrected for that judge's errors (:func:`evalhydra.stats.judge.corrected_rate`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalhydra.analysis.aggregate import Target
from evalhydra.analysis.selection import PASSED_SQL, Selection
from evalhydra.core import strictjson
from evalhydra.stats.clustered import CaseHistogram, pass_rate_interval, rate_variance
from evalhydra.stats.judge import Agreement, agreement, corrected_rate, self_consistency
from evalhydra.store.labels import labels_by_output, output_sha256
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["JudgeCalibration", "JudgeKey", "JudgeReport", "Settings", "calibrations", "has_labels",
           "judge_name", "judge_report", "judges_in_summary", "judges_of"]

#: eval id, judge service, judge model, matcher settings (a fingerprint; "" for runs before it).
JudgeKey = tuple[str, str, str, str]

_JUDGES_SQL = f"""select "group", eval_id, service_name, coalesce(model, ''), judge_service, judge_model,
  run_id, count(*) from {{table}} where ({{where}}) and not {INFRA_ERROR_SQL} group by 1, 2, 3, 4, 5, 6, 7"""

# driven by the labelled cases (few) through idx_results_eval_case, not by the judge's results (many)
_PAIRS_SQL = f"""select r.case_id, r.output, {PASSED_SQL}, r.run_id
from (select distinct eval_id, case_id from labels where eval_id = ?) l
  join results r on r.eval_id = l.eval_id and r.case_id = l.case_id
where coalesce(r.judge_service, '') = ? and r.judge_model = ? and not {INFRA_ERROR_SQL}
order by r.evaluated_at, r.run_id"""

# the verdicts of each (output, judge, run), an output named by its rank among the outputs
_REPEATS_SQL = f"""select eval_id, coalesce(judge_service, ''), judge_model, run_id, count(*),
  sum({PASSED_SQL}), dense_rank() over (order by eval_id, case_id, output)
from results where run_id in ({{marks}}) and judge_model is not null and not {INFRA_ERROR_SQL}
group by eval_id, case_id, output, judge_service, judge_model, run_id"""


class Settings:
    """Each run's judge settings per eval (``runs.judges``), read once per run."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.runs: dict[str, dict[str, str]] = {}

    def of(self, run_id: str, eval_id: str) -> str:
        """The fingerprint of ``eval_id``'s judge in ``run_id`` ("" when the run kept none)."""
        if run_id not in self.runs:
            row = self.conn.execute("select judges from runs where run_id = ?", [run_id]).fetchone()
            found = strictjson.stored(row[0], {}) if row else {}
            self.runs[run_id] = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
        return self.runs[run_id].get(eval_id, "")


@dataclass(frozen=True)
class JudgeCalibration:
    """A judge against the labels: its agreement, and how often it repeats itself."""

    key: JudgeKey
    agreement: Agreement
    repeated_outputs: int  # outputs it judged more than once among the runs and their rejudges
    self_consistency: float | None


def judge_name(key: JudgeKey) -> str:
    """``service/model`` of a judge (its settings fingerprint is ``key[3]``)."""
    return f"{key[1]}/{key[2]}"


def has_labels(conn: sqlite3.Connection) -> bool:
    """Whether anyone labelled anything in this store."""
    return conn.execute("select 1 from labels limit 1").fetchone() is not None


def judges_of(conn: sqlite3.Connection, sel: Selection,
              settings: Settings | None = None) -> dict[Target, dict[JudgeKey | None, int]]:
    """Per target, its scored results by the judge that gave them (None: no judge)."""
    settings = settings or Settings(conn)
    out: dict[Target, dict[JudgeKey | None, int]] = {}
    for g, e, s, m, judge_service, judge_model, run_id, n in conn.execute(
            _JUDGES_SQL.format(table=sel.table, where=sel.where), sel.params):
        key = None if judge_model is None else (e, judge_service or "", judge_model, settings.of(run_id, e))
        found = out.setdefault((g, e, s, m), {})
        found[key] = found.get(key, 0) + n
    return out


def judges_in_summary(summary: Mapping[str, Any],
                      settings: Settings) -> dict[Target, dict[JudgeKey | None, int]] | None:
    """:func:`judges_of` read from a run summary's ``judges`` (None when a target's summary was
    saved before summaries kept them)."""
    out: dict[Target, dict[JudgeKey | None, int]] = {}
    for t in summary["targets"]:
        if "judges" not in t:
            return None
        found: dict[JudgeKey | None, int] = {}
        for service, model, run_id, n in t["judges"]:
            key = (t["eval"], service, model, settings.of(run_id, t["eval"]))
            found[key] = found.get(key, 0) + n
        unjudged = t["n"] - t["errors"] - sum(found.values())
        if unjudged:
            found[None] = unjudged
        if found:  # as judges_of, which counts scored results only
            out[(t["group"], t["eval"], t["service"], t["model"])] = found
    return out


def _family(conn: sqlite3.Connection, run_ids: Sequence[str]) -> list[str]:
    """The runs, their rejudges and the runs they rejudged."""
    marks = ", ".join("?" * len(run_ids))
    found = conn.execute(
        f"select run_id from runs where parent_run_id in ({marks}) union select parent_run_id from runs"
        f" where run_id in ({marks}) and parent_run_id is not null", [*run_ids, *run_ids]).fetchall()
    return list(dict.fromkeys([*run_ids, *(row[0] for row in found)]))


def _repeats(conn: sqlite3.Connection, run_ids: Sequence[str],
             settings: Settings) -> dict[JudgeKey, list[tuple[int, int]]]:
    family = _family(conn, run_ids) if run_ids else []
    if len(family) <= len(set(run_ids)):
        return {}  # no rejudge: nothing judged twice to compare
    tally: dict[tuple[int, JudgeKey], list[int]] = {}
    for eval_id, service, model, run_id, verdicts, passes, output in conn.execute(
            _REPEATS_SQL.format(marks=", ".join("?" * len(family))), family):
        counts = tally.setdefault((output, (eval_id, service, model, settings.of(run_id, eval_id))), [0, 0])
        counts[0] += verdicts
        counts[1] += passes
    out: dict[JudgeKey, list[tuple[int, int]]] = {}
    for (_, key), (verdicts, passes) in tally.items():
        if verdicts > 1:
            out.setdefault(key, []).append((verdicts, passes))
    return out


def _pairs(conn: sqlite3.Connection, key: JudgeKey, labels: Mapping[tuple[str, str, str], bool],
           settings: Settings) -> list[tuple[bool, bool]]:
    """(human, judge) per labelled output the judge judged; its newest verdict of each."""
    newest: dict[tuple[str, str], bool] = {}
    for case_id, output, passed, run_id in conn.execute(_PAIRS_SQL, key[:3]):
        digest = output_sha256(output)
        if (key[0], case_id, digest) in labels and settings.of(run_id, key[0]) == key[3]:
            newest[(case_id, digest)] = bool(passed)
    return [(labels[(key[0], case, digest)], judge) for (case, digest), judge in newest.items()]


def calibrations(conn: sqlite3.Connection, keys: Iterable[JudgeKey], run_ids: Sequence[str] = (), *,
                 resamples: int = 1000, settings: Settings | None = None) -> dict[JudgeKey, JudgeCalibration]:
    """Each judge's agreement with the labels, and its self-consistency over ``run_ids`` and their
    rejudges (``resamples``: of Krippendorff's α bootstrap interval; 0 leaves it out)."""
    settings = settings or Settings(conn)
    keys = sorted(set(keys))
    labels = labels_by_output(conn) if keys and has_labels(conn) else {}
    repeats = _repeats(conn, run_ids, settings) if keys else {}
    out = {}
    for key in keys:
        pairs = _pairs(conn, key, labels, settings) if labels else []
        again = repeats.get(key, [])
        out[key] = JudgeCalibration(key, agreement(pairs, resamples=resamples), len(again),
                                    self_consistency(again))
    return out


def _single_judge(judges: Mapping[JudgeKey | None, int]) -> tuple[JudgeKey | None, str | None]:
    """The one judge of a target's results, or why there is none to correct."""
    named = [key for key in judges if key is not None]
    if not named:
        return None, None
    if len(named) > 1:
        names = sorted({judge_name(k) for k in named})
        return None, (f"judged by {len(named)} judges ({', '.join(names)})" if len(names) == len(named)
                      else f"judged under {len(named)} matcher settings ({', '.join(names)})")
    if None in judges:
        return None, f"only {judges[named[0]]} of {sum(judges.values())} scored results were judged"
    return named[0], None


@dataclass(frozen=True)
class JudgeReport:
    """The judges of a selection and the fields they add to each judged target
    (:func:`judge_report`)."""

    judges: dict[JudgeKey, JudgeCalibration]
    targets: dict[Target, dict[str, Any]]
    judge_of: dict[Target, JudgeKey]  # the targets one judge scored


def judge_report(conn: sqlite3.Connection, sel: Selection, histograms: Mapping[Target, CaseHistogram],
                 *, resamples: int = 0, summary: Mapping[str, Any] | None = None) -> JudgeReport:
    """Per judged target: its judge, the judge's labels and agreement, and the corrected pass rate
    (``corrected_pass_rate``, ``corrected_ci_low``/``high``, ``corrected_ci_method``, or
    ``corrected_problem`` saying why there is none). Targets no judge scored are left out.

    The targets' judges come from ``summary`` (a run summary of ``sel``) when it keeps them,
    else from a pass over ``sel``'s results."""
    settings = Settings(conn)
    kept = judges_in_summary(summary, settings) if summary is not None else None
    by_target = kept if kept is not None else judges_of(conn, sel, settings)
    picked = {target: _single_judge(judges) for target, judges in by_target.items()}
    found = calibrations(conn, [k for judges in by_target.values() for k in judges if k], sel.run_ids,
                         resamples=resamples, settings=settings)
    targets = {}
    for target, (key, problem) in picked.items():
        if key is None and problem is None:
            continue
        targets[target] = _correction(key, problem, found.get(key) if key else None,
                                      histograms.get(target, {}))
    return JudgeReport(found, targets, {t: key for t, (key, _) in picked.items() if key})


def _correction(key: JudgeKey | None, problem: str | None, calibration: JudgeCalibration | None,
                hist: CaseHistogram) -> dict[str, Any]:
    fields: dict[str, Any] = {"judge": judge_name(key) if key else None, "judge_labels": 0,
                              "judge_kappa": None, "judge_sensitivity": None, "judge_specificity": None,
                              "judge_self_consistency": None, "corrected_pass_rate": None,
                              "corrected_ci_low": None, "corrected_ci_high": None,
                              "corrected_ci_method": None, "corrected_problem": problem}
    if calibration is None:
        return fields
    found = calibration.agreement
    fields.update(judge_labels=found.n, judge_kappa=found.kappa, judge_sensitivity=found.sensitivity,
                  judge_specificity=found.specificity, judge_self_consistency=calibration.self_consistency)
    if not found.n:
        fields["corrected_problem"] = "no labels of this judge's outputs (evalhydra label)"
        return fields
    rate = pass_rate_interval(hist)
    if not rate.n_cases:
        return fields
    fixed = corrected_rate(rate.estimate, rate_variance(hist), found)
    fields.update(corrected_pass_rate=fixed.estimate, corrected_ci_low=fixed.low,
                  corrected_ci_high=fixed.high, corrected_ci_method=fixed.method,
                  corrected_problem=fixed.problem)
    return fields
