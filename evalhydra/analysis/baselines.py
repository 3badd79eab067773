"""The seed's ``baseline_comparisons`` over a selection, computed in SQL: each service against
the baseline service, and each model against its service's baseline model, per eval, case-paired
(:mod:`evalhydra.analysis.compare` pairs them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any

from evalhydra.analysis.compare import EvalPairing, Side, comparison_row, paired_by_eval
from evalhydra.analysis.selection import Selection
from evalhydra.analysis.zigstats import SCHEMA_VERSION

__all__ = ["baseline_comparisons_sql"]


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
