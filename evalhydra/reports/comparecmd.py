"""``evalhydra compare``: two runs, services or models, paired case by case.

A *target* is ``[RUN][@SERVICE[:MODEL]]``:

* ``RUN`` (an id, a unique prefix or ``latest``): the cells of that run;
* ``@SERVICE`` / ``@SERVICE:MODEL`` narrows to a service (and model; only the
  first ``:`` splits, so ``@ollama:llama3:8b`` is service ``ollama``, model
  ``llama3:8b``);
* without ``RUN``, the latest stored result of every (eval, service, model,
  case, trial) of that service, from any run.

Both sides are paired on (group, eval, case, trial). Results with an
infrastructure error (HTTP failure, timeout, agent ERROR/TIMEOUT) are left
out, counted apart: they are neither passes nor failures. Per eval (and for
all evals pooled) the output gives both pass rates, zig_eval's delta
interval, the paired difference with Newcombe's 95% interval (method 10),
McNemar's exact p, and the cases that regressed (baseline passed, candidate
failed) or improved. A paired interval entirely below zero is a regression.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.reports.compare import EvalPairing, Side, comparison_row, paired_by_eval, pooled
from evalhydra.reports.markdown import comparison_table
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["Comparison", "Target", "compare", "parse_target", "render", "regressions"]

_LATEST = """cell_key in (select cell_key from (select cell_key, row_number() over (
    partition by eval_id, service_name, model, case_id, run_index
    order by evaluated_at desc, cell_key desc) as recency from results {where}) where recency = 1)"""


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


def _side(target: Target, evals: Sequence[str]) -> Side:
    conds: list[str] = []
    params: list[Any] = []
    for column, value in (("service_name", target.service), ("model", target.model)):
        if value is not None:
            conds.append(f"{column} = ?")
            params.append(value)
    if evals:
        conds.append(f"eval_id in ({', '.join('?' * len(evals))})")
        params += list(evals)
    if target.runs:
        marks = ", ".join("?" * len(target.runs))
        conds.insert(0, f"cell_key in (select cell_key from run_cells where run_id in ({marks}))")
        params = [*target.runs, *params]
        return Side(target.label, " and ".join(conds), tuple(params))
    inner = f"where {' and '.join(conds)}" if conds else ""
    return Side(target.label, _LATEST.format(where=inner), tuple(params))


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

    def to_json(self) -> dict[str, Any]:
        """The ``--format json`` document."""
        return {"baseline": self.baseline, "candidate": self.candidate, "target_kind": self.kind,
                "errors_left_out": {"baseline": self.errors[0], "candidate": self.errors[1]},
                "not_run_on": self.one_sided, "comparisons": self.rows, "overall": self.overall}


def _kind(base: Target, cand: Target) -> str:
    if base.service != cand.service:
        return "service"
    if base.model != cand.model:
        return "model"
    return "run"


def _errors(conn: sqlite3.Connection, side: Side) -> int:
    sql = f"select count(*) from results where ({side.where}) and {INFRA_ERROR_SQL}"
    return int(conn.execute(sql, side.params).fetchone()[0])


def compare(conn: sqlite3.Connection, base: Target, cand: Target,
            evals: Sequence[str] = ()) -> Comparison:
    """Compare two targets; results with an infrastructure error are left out.

    Evals with results on one side only are listed in ``one_sided`` and left out
    of the rows and of the pooled statistics.

    Raises:
        EvalHydraError: If a side is empty or selects no results.
    """
    for name, target in (("baseline", base), ("candidate", cand)):
        if not (target.runs or target.service or target.model):
            raise EvalHydraError(f"The {name} {target.label!r} names no run, service or model.",
                                 "Give RUN (an id, a prefix or 'latest') and/or @SERVICE[:MODEL]; "
                                 "is a shell variable unset?")
    sides = (_side(base, evals), _side(cand, evals))
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

    return Comparison(base.label, cand.label, kind, [row(p) for p in both], row(pooled(both)),
                      errors, one_sided)


def regressions(result: Comparison) -> list[dict[str, Any]]:
    """Rows (per eval, or pooled) whose paired 95% interval lies below zero."""
    rows = [*result.rows, result.overall]
    return [r for r in rows if r["paired"] and r["paired"]["ci_high"] < 0]


def _case_lines(rows: Sequence[dict[str, Any]], key: str, limit: int) -> list[str]:
    lines = []
    for r in rows:
        cases = (r["paired"] or {}).get(key) or []
        if cases:
            more = f", … {len(cases) - limit} more" if len(cases) > limit else ""
            lines.append(f"  {r['eval_id']}: {', '.join(cases[:limit])}{more}")
    return lines


def _lists(result: Comparison, limit: int) -> list[str]:
    out = []
    for key, title in (("regressed", "regressed (baseline passed, candidate failed)"),
                       ("improved", "improved (baseline failed, candidate passed)")):
        count = sum(len((r["paired"] or {}).get(key) or []) for r in result.rows)
        out += ["", f"{title}: {count} case(s)", *_case_lines(result.rows, key, limit)]
    return out


def _verdict_line(result: Comparison) -> str:
    worse = regressions(result)
    if not any(r["paired"] for r in [*result.rows, result.overall]):
        return "verdict: no (case, trial) pairs in common; paired statistics are not available"
    if worse:
        names = ", ".join(r["eval_id"] for r in worse)
        return f"verdict: REGRESSION: the candidate is significantly worse on {names}"
    better = [r for r in [*result.rows, result.overall] if r["paired"] and r["paired"]["ci_low"] > 0]
    if better:
        return f"verdict: improvement on {', '.join(r['eval_id'] for r in better)}; no significant regression"
    return "verdict: no significant change (every paired 95% interval contains 0)"


def render(result: Comparison, fmt: str = "text", limit: int = 50) -> str:
    """The comparison as ``text``, ``md`` or ``json``."""
    if fmt == "json":
        return json.dumps(result.to_json(), indent=2, ensure_ascii=False)
    table: Callable[[list[dict[str, Any]]], str] = (
        (lambda rows: comparison_table(rows)) if fmt == "md"
        else (lambda rows: comparison_table(rows, tablefmt="simple")))
    head = [f"baseline:  {result.baseline}", f"candidate: {result.candidate}"]
    if any(result.errors):
        head.append(f"infrastructure errors left out: {result.errors[0]} baseline,"
                    f" {result.errors[1]} candidate")
    for eval_id, side in sorted(result.one_sided.items()):
        head.append(f"{eval_id}: not run on the {side}; left out")
    head.append("")
    body = table([*result.rows, result.overall])
    return "\n".join([*head, body, *_lists(result, limit), "", _verdict_line(result)])
