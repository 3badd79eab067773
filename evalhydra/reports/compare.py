"""Comparisons computed in SQL: the seed's baselines plus paired statistics.

Two *sides* (each a condition on ``results``: some runs, a service, a model)
are paired on ``(group, eval_id, case_id, run_index)``. Per eval, SQLite
returns the 2×2 table of paired outcomes and the cases that regressed
(baseline passed, candidate failed) or improved; Python only turns the counts
into Newcombe's paired interval and McNemar's exact p-value
(:mod:`evalhydra.reports.stats`).

:func:`baseline_comparisons_sql` builds the same document as
the row-based reference (``tests/reference/zig.py``) without loading rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalhydra.reports.selection import PASSED_SQL, Selection
from evalhydra.reports.stats import delta_interval, mcnemar_exact_p, newcombe_paired_interval, wilson_interval
from evalhydra.reports.zig import CONFIDENCE_LEVEL, SCHEMA_VERSION
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = [
    "PAIRED_METHOD",
    "EvalPairing",
    "Side",
    "baseline_comparisons_sql",
    "comparison_row",
    "paired_block",
    "paired_by_eval",
    "pooled",
]

PAIRED_METHOD = "newcombe-paired"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a label and a condition on ``results``."""

    label: str
    where: str
    params: tuple[Any, ...] = ()


@dataclass
class EvalPairing:
    """Both sides of one eval: totals plus the paired 2×2 table.

    ``both``/``improved``/``regressed``/``neither`` count shared
    ``(case_id, run_index)`` keys; ``ambiguous`` is set when a key occurs
    twice within a side (e.g. a service that ran several models), in which
    case the paired statistics are not defined.
    """

    group: str
    eval_id: str
    base_total: int = 0
    base_passed: int = 0
    cand_total: int = 0
    cand_passed: int = 0
    both: int = 0
    improved: int = 0
    regressed: int = 0
    neither: int = 0
    ambiguous: bool = False
    regressed_cases: list[str] = field(default_factory=list)
    improved_cases: list[str] = field(default_factory=list)

    @property
    def n_pairs(self) -> int:
        """Shared (case, trial) keys."""
        return self.both + self.improved + self.regressed + self.neither




def _keyed(side: Side, skip_errors: bool) -> str:
    where = f"({side.where}) and not {INFRA_ERROR_SQL}" if skip_errors else side.where
    return (
        f'select "group" as g, eval_id as e, case_id as c, run_index as i, count(*) as k,'
        f" max({PASSED_SQL}) as p, sum({PASSED_SQL}) as ps from results where {where}"
        " group by g, e, c, i"
    )


def _pairs_sql(base: Side, cand: Side, skip_errors: bool) -> str:
    b, x = _keyed(base, skip_errors), _keyed(cand, skip_errors)
    return f"""
        with b as materialized ({b}), x as materialized ({x}),
        sides as (
          select g, e, sum(k) as total, sum(ps) as passed, max(k) as kmax, 0 as side from b
            group by g, e
          union all
          select g, e, sum(k), sum(ps), max(k), 1 from x group by g, e),
        pairs as (
          select b.g, b.e, sum(b.p and x.p) as both, sum(x.p and not b.p) as improved,
            sum(b.p and not x.p) as regressed, sum(not b.p and not x.p) as neither
          from b join x on x.g = b.g and x.e = b.e and x.c = b.c and x.i = b.i group by b.g, b.e)
        select s.g, s.e, s.side, s.total, s.passed, s.kmax, p.both, p.improved, p.regressed,
          p.neither
        from sides s left join pairs p on p.g = s.g and p.e = s.e order by s.g, s.e, s.side"""


def _discordant_sql(base: Side, cand: Side, skip_errors: bool) -> str:
    b, x = _keyed(base, skip_errors), _keyed(cand, skip_errors)
    return f"""
        with b as materialized ({b}), x as materialized ({x})
        select distinct b.g, b.e, b.c, b.p from b join x
          on x.g = b.g and x.e = b.e and x.c = b.c and x.i = b.i
        where b.p != x.p order by b.g, b.e, b.c"""


def paired_by_eval(conn: sqlite3.Connection, base: Side, cand: Side, *,
                   skip_errors: bool = False) -> list[EvalPairing]:
    """Per eval present on either side: totals, the paired table, the changed cases.

    Args:
        conn: A connection to the store.
        base: The baseline side.
        cand: The candidate side.
        skip_errors: Leave out results with an infrastructure error (they are
            neither passes nor failures); zig_eval's baselines keep them as failures.

    Returns:
        One :class:`EvalPairing` per ``(group, eval_id)``, sorted.
    """
    out: dict[tuple[str, str], EvalPairing] = {}
    params = [*base.params, *cand.params]
    for g, e, side, total, passed, kmax, *table in conn.execute(_pairs_sql(base, cand, skip_errors),
                                                                params):
        item = out.setdefault((g, e), EvalPairing(g, e))
        if side == 0:
            item.base_total, item.base_passed = total, passed
        else:
            item.cand_total, item.cand_passed = total, passed
        item.ambiguous = item.ambiguous or kmax > 1
        if table[0] is not None:
            item.both, item.improved, item.regressed, item.neither = table
    for g, e, case, base_passed in conn.execute(_discordant_sql(base, cand, skip_errors), params):
        item = out[(g, e)]
        (item.regressed_cases if base_passed else item.improved_cases).append(case)
    return list(out.values())


def paired_block(pairing: EvalPairing) -> dict[str, Any] | None:
    """zig.py's ``paired`` block from counts, or None when pairing is undefined."""
    if pairing.ambiguous or pairing.n_pairs == 0:
        return None
    n = pairing.n_pairs
    low, high = newcombe_paired_interval(pairing.both, pairing.improved, pairing.regressed,
                                         pairing.neither)
    return {
        "n_pairs": n,
        "difference": (pairing.improved - pairing.regressed) / n,
        "ci_low": low,
        "ci_high": high,
        "method": PAIRED_METHOD,
        "mcnemar_p": mcnemar_exact_p(pairing.regressed, pairing.improved),
        "regressed": list(pairing.regressed_cases),
        "improved": list(pairing.improved_cases),
    }


def comparison_row(pairing: EvalPairing, *, kind: str, service_name: str | None,
                   baseline: str, candidate: str) -> dict[str, Any]:
    """One seed comparison row (zig.py key order), ending with the ``paired`` block.

    Args:
        pairing: Counts for one eval.
        kind: ``target_kind``: ``service``, ``model`` or (``compare``) ``run``.
        service_name: The service of model rows, else None.
        baseline: Baseline name.
        candidate: Candidate name.
    """
    base_rate = pairing.base_passed / pairing.base_total if pairing.base_total else 0.0
    cand_rate = pairing.cand_passed / pairing.cand_total if pairing.cand_total else 0.0
    base_ci = wilson_interval(pairing.base_passed, pairing.base_total)
    cand_ci = wilson_interval(pairing.cand_passed, pairing.cand_total)
    low, high = delta_interval(*base_ci, *cand_ci, pairing.base_total, pairing.cand_total)
    return {
        "group": pairing.group,
        "eval_id": pairing.eval_id,
        "target_kind": kind,
        "service_name": service_name,
        "baseline_name": baseline,
        "candidate_name": candidate,
        "baseline_pass_rate": base_rate,
        "candidate_pass_rate": cand_rate,
        "delta_pass_rate": cand_rate - base_rate,
        "delta_ci_low": low,
        "delta_ci_high": high,
        "confidence_level": CONFIDENCE_LEVEL,
        "paired": paired_block(pairing),
    }


#: The keys that name a comparison (the paired file repeats them beside each block).
_IDENTITY = ("group", "eval_id", "target_kind", "service_name", "baseline_name", "candidate_name")


def split_paired(comparisons: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The seed's comparison objects (exactly zig_eval's keys) and the paired blocks beside them.

    ``baseline_comparisons.json`` holds the first, ``paired_comparisons.json`` the second:
    each paired entry names its comparison with the seed's identity keys.
    """
    seed = [{k: v for k, v in c.items() if k != "paired"} for c in comparisons]
    paired = [{**{k: c[k] for k in _IDENTITY}, **c["paired"]} for c in comparisons if c.get("paired")]
    return seed, paired


# --- the seed's baselines over a selection -----------------------------------


def _tree(evals_doc: Mapping[str, Any]) -> Iterator[tuple[str, str, list[tuple[str, list[str]]]]]:
    """(group, eval_id, [(service, [models])]) in the document's first-seen order."""
    for ev in evals_doc["evals"]:
        services = [(s["service_name"], [m["model"] for m in s["models"]]) for s in ev["services"]]
        yield ev["group"], ev["eval_id"], services


def _side(sel: Selection, label: str, service: str, model: str | None) -> Side:
    where = f"({sel.where}) and service_name = ?"
    params: tuple[Any, ...] = (*sel.params, service)
    if model is not None:
        where += " and model = ?"
        params += (model,)
    return Side(label, where, params)


class _PairCache:
    """paired_by_eval results per (base side, candidate side), computed once."""

    def __init__(self, conn: sqlite3.Connection, sel: Selection) -> None:
        self.conn, self.sel = conn, sel
        self.cache: dict[tuple[Any, ...], dict[tuple[str, str], EvalPairing]] = {}

    def get(self, key: tuple[Any, ...], base: Side, cand: Side) -> dict[tuple[str, str], EvalPairing]:
        if key not in self.cache:
            pairings = paired_by_eval(self.conn, base, cand)
            self.cache[key] = {(p.group, p.eval_id): p for p in pairings}
        return self.cache[key]


def _service_rows(pairs: _PairCache, evals_doc: Mapping[str, Any],
                  baseline: str) -> list[dict[str, Any]]:
    rows = []
    for group, eval_id, services in _tree(evals_doc):
        names = [s for s, _ in services]
        if baseline not in names:
            continue
        for name in names:
            if name == baseline:
                continue
            base, cand = _side(pairs.sel, baseline, baseline, None), _side(pairs.sel, name, name, None)
            pairing = pairs.get(("service", baseline, name), base, cand)[(group, eval_id)]
            rows.append(comparison_row(pairing, kind="service", service_name=None,
                                       baseline=baseline, candidate=name))
    return rows


def _model_rows(pairs: _PairCache, evals_doc: Mapping[str, Any],
                baseline_models: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for group, eval_id, services in _tree(evals_doc):
        for service, models in services:
            baseline = baseline_models.get(service, models[0])
            if baseline not in models:
                continue
            for model in models:
                if model == baseline:
                    continue
                base = _side(pairs.sel, baseline, service, baseline)
                cand = _side(pairs.sel, model, service, model)
                pairing = pairs.get(("model", service, baseline, model), base, cand)[(group, eval_id)]
                rows.append(comparison_row(pairing, kind="model", service_name=service,
                                           baseline=baseline, candidate=model))
    return rows


def baseline_comparisons_sql(
    conn: sqlite3.Connection,
    sel: Selection,
    evals_doc: Mapping[str, Any],
    *,
    baseline_service: str | None,
    baseline_models: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The seed's ``baseline_comparisons`` document computed in SQL.

    Args:
        conn: A connection to the store.
        sel: The rows compared.
        evals_doc: Their ``evals.json`` document (gives first-seen order and
            which services and models exist).
        baseline_service: Baseline service, or None for no service rows.
        baseline_models: Baseline model per service (default: first seen).

    Returns:
        ``{schema_version: 2, baseline_comparisons: [...]}``.
    """
    pairs = _PairCache(conn, sel)
    items = _service_rows(pairs, evals_doc, baseline_service) if baseline_service else []
    items += _model_rows(pairs, evals_doc, baseline_models or {})
    return {"schema_version": SCHEMA_VERSION, "baseline_comparisons": items}


def pooled(pairings: Sequence[EvalPairing]) -> EvalPairing:
    """All evals pooled into one pairing (ambiguous if any eval is)."""
    total = EvalPairing("*", "all evals")
    for p in pairings:
        total.base_total += p.base_total
        total.base_passed += p.base_passed
        total.cand_total += p.cand_total
        total.cand_passed += p.cand_passed
        total.both += p.both
        total.improved += p.improved
        total.regressed += p.regressed
        total.neither += p.neither
        total.ambiguous = total.ambiguous or p.ambiguous
        total.regressed_cases += [f"{p.eval_id}/{c}" for c in p.regressed_cases]
        total.improved_cases += [f"{p.eval_id}/{c}" for c in p.improved_cases]
    return total
