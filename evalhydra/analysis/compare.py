"""Comparisons computed in SQL: the seed's baselines plus paired statistics.

Two *sides* (each a condition on ``results``: some runs, a service, a model)
are paired on ``(group, eval_id, case_id)``. Per eval, SQLite returns each
side's totals and the sums of the per-case differences of the pass fractions
(candidate − baseline, over scored trials); Python only turns them into the
case-clustered paired interval and test (:mod:`evalhydra.stats.clustered`).
The cases that regressed (lower pass fraction on the candidate) or improved,
and the (case, trial) pairs whose verdict flipped on the same output (a
judge's flip, not the model's), are listed.

:func:`~evalhydra.analysis.baselines.baseline_comparisons_sql` builds the same document as
the row-based reference (``tests/reference/zig.py``) without loading rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from evalhydra.analysis.selection import PASSED_SQL
from evalhydra.analysis.zigstats import CONFIDENCE_LEVEL
from evalhydra.stats.clustered import SIGN_FLIP, CaseDiffs, holm, paired_difference
from evalhydra.stats.permutation import min_p
from evalhydra.stats.rates import delta_interval, mcnemar_exact_p, wilson_interval
from evalhydra.store.fractions import parse_digest
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = [
    "ALPHA",
    "EvalPairing",
    "Side",
    "adjust_comparison",
    "adjust_family",
    "by_case_sql",
    "comparison_row",
    "is_improvement",
    "is_regression",
    "paired_block",
    "paired_by_eval",
    "pooled",
    "unreachable",
]

#: The family-wise error rate of the regression verdicts.
ALPHA = 0.05


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a label and a condition on ``results`` (or, with ``fractions``,
    on a finished run's ``case_fractions``: :mod:`evalhydra.store.fractions`)."""

    label: str
    where: str
    params: tuple[Any, ...] = ()
    fractions: bool = False


@dataclass
class EvalPairing:
    """Both sides of one eval: totals plus the per-case differences.

    ``ambiguous`` is set when a (case, trial) occurs twice within a side (e.g.
    a service that ran several models), in which case the paired statistics
    are not defined.
    """

    group: str
    eval_id: str
    base_total: int = 0
    base_passed: int = 0
    cand_total: int = 0
    cand_passed: int = 0
    diffs: CaseDiffs = field(default_factory=CaseDiffs)
    ambiguous: bool = False
    regressed_cases: list[str] = field(default_factory=list)
    improved_cases: list[str] = field(default_factory=list)
    judge_flips: list[str] = field(default_factory=list)


def by_case_sql(side: Side) -> str:
    """Per case of a side: ``g, e, c``, its results ``k``, distinct trials ``u``, passes ``ok``, scored."""
    if side.fractions:  # a case on several targets has k > u: ambiguous, as from results
        return ('select "group" as g, eval_id as e, case_id as c, sum(results) as k,'
                " case when count(*) = 1 then max(trials) else 0 end as u, sum(passed) as ok,"
                f" sum(scored) as scored from case_fractions where {side.where} group by g, e, c")
    return (
        f'select "group" as g, eval_id as e, case_id as c, count(*) as k,'
        f" count(distinct run_index) as u, sum({PASSED_SQL}) as ok,"
        f" count(*) - sum({INFRA_ERROR_SQL}) as scored from results where {side.where}"
        " group by g, e, c"
    )


_FRACTIONS = "1.0 * b.ok / b.scored as fb, 1.0 * x.ok / x.scored as fx"


def _pairs_sql(base: Side, cand: Side, skip_errors: bool) -> str:
    total = "scored" if skip_errors else "k"
    return f"""
        with b as materialized ({by_case_sql(base)}), x as materialized ({by_case_sql(cand)}),
        sides as (
          select g, e, sum({total}) as total, sum(ok) as passed, max(k > u) as dup, 0 as side
            from b group by g, e
          union all
          select g, e, sum({total}), sum(ok), max(k > u), 1 from x group by g, e),
        shared as materialized (
          select b.g, b.e, {_FRACTIONS}, b.scored as kb, x.scored as kx,
            x.ok * b.scored - b.ok * x.scored as num
          from b join x on x.g = b.g and x.e = b.e and x.c = b.c
          where b.scored > 0 and x.scored > 0),
        moved as (
          select g, e, group_concat(num || '/' || den || ':' || cases, ' ') as moves from (
            select g, e, num, kb * kx as den, count(*) as cases from shared where num != 0
            group by g, e, num, den) group by g, e),
        pairs as (
          select g, e, count(*) as n, sum(fx - fb) as sd, sum((fx - fb) * (fx - fb)) as sd2,
            max(max(kb, kx)) as tmax, sum(fb = 1 and fx = 1) as both, sum(fx > fb) as improved,
            sum(fb > fx) as regressed, sum(fb = 0 and fx = 0) as neither, min(min(kb, kx)) as tmin,
            sum(fb * (1 - fb) * kb / max(kb - 1, 1) + fx * (1 - fx) * kx / max(kx - 1, 1)) as w,
            sum(fb * (1 - fb) / max(kb - 1, 1) + fx * (1 - fx) / max(kx - 1, 1)) as wk
          from shared group by g, e)
        select s.g, s.e, s.side, s.total, s.passed, s.dup, m.moves, p.n, p.sd, p.sd2, p.tmax, p.both,
          p.improved, p.regressed, p.neither, p.tmin, p.w, p.wk
        from sides s left join pairs p on p.g = s.g and p.e = s.e
          left join moved m on m.g = s.g and m.e = s.e order by s.g, s.e, s.side"""


def _parse_moves(text: str | None) -> dict[Fraction, int]:
    """``moved.moves`` (``"num/den:cases …"``) as exact differences with their case counts."""
    out: dict[Fraction, int] = {}
    for item in (text or "").split():
        value, _, cases = item.partition(":")
        move = Fraction(value)
        out[move] = out.get(move, 0) + int(cases)
    return out


def _changed_sql(base: Side, cand: Side) -> str:
    return f"""
        with b as materialized ({by_case_sql(base)}), x as materialized ({by_case_sql(cand)})
        select b.g, b.e, b.c, 1.0 * b.ok / b.scored > 1.0 * x.ok / x.scored from b join x
          on x.g = b.g and x.e = b.e and x.c = b.c
        where b.scored > 0 and x.scored > 0 and 1.0 * b.ok / b.scored != 1.0 * x.ok / x.scored
        order by b.g, b.e, b.c"""


def _trials(side: Side) -> str:
    return (f'select "group" as g, eval_id as e, case_id as c, run_index as i, {PASSED_SQL} as p,'
            f" output as o from results where ({side.where}) and not {INFRA_ERROR_SQL}")


def _flips_sql(base: Side, cand: Side) -> str:
    return f"""
        select b.g, b.e, b.c, b.i from ({_trials(base)}) b join ({_trials(cand)}) x
          on x.g = b.g and x.e = b.e and x.c = b.c and x.i = b.i
        where b.o = x.o and b.p != x.p order by b.g, b.e, b.c, b.i"""


def _fold_pairs(rows: Iterator[tuple[Any, ...]], out: dict[tuple[str, str], EvalPairing]) -> None:
    for g, e, side, total, passed, dup, moves, *cases in rows:
        item = out.setdefault((g, e), EvalPairing(g, e))
        if side == 0:
            item.base_total, item.base_passed = total, passed
        else:
            item.cand_total, item.cand_passed = total, passed
        item.ambiguous = item.ambiguous or bool(dup)
        if cases[0] is not None:
            item.diffs = CaseDiffs(*cases)
            item.diffs.moves = _parse_moves(moves)


def paired_by_eval(conn: sqlite3.Connection, base: Side, cand: Side, *,
                   skip_errors: bool = False) -> list[EvalPairing]:
    """Per eval present on either side: totals, the per-case differences, the changed cases.

    Args:
        conn: A connection to the store.
        base: The baseline side.
        cand: The candidate side.
        skip_errors: Totals count scored results only (infrastructure errors are
            neither passes nor failures); zig_eval's baselines count them as
            failures. The per-case fractions always leave errors out.

    Returns:
        One :class:`EvalPairing` per ``(group, eval_id)``, sorted.
    """
    out: dict[tuple[str, str], EvalPairing] = {}
    params = [*base.params, *cand.params]
    _fold_pairs(conn.execute(_pairs_sql(base, cand, skip_errors), params), out)
    for g, e, case, worse in conn.execute(_changed_sql(base, cand), params):
        item = out[(g, e)]
        (item.regressed_cases if worse else item.improved_cases).append(case)
    flips = _digest_flips(conn, base, cand) if base.fractions and cand.fractions else conn.execute(
        _flips_sql(base, cand), params)
    for g, e, case, trial in flips:
        out[(g, e)].judge_flips.append(f"{case}#{trial}")
    return list(out.values())


def _digest_flips(conn: sqlite3.Connection, base: Side, cand: Side) -> list[tuple[str, str, str, int]]:
    """:func:`_flips_sql`'s rows from two runs' saved digests: the (case, trial) pairs scored on
    both sides whose output hash is the same and whose verdict is not."""
    sql = f"""select b.g, b.e, b.c, b.d, x.d from
      (select "group" as g, eval_id as e, case_id as c, digest as d from case_fractions
        where {base.where}) b
      join (select "group" as g, eval_id as e, case_id as c, digest as d from case_fractions
        where {cand.where}) x on x.g = b.g and x.e = b.e and x.c = b.c
      where b.d != x.d order by b.g, b.e, b.c"""
    out = []
    for g, e, c, before, after in conn.execute(sql, [*base.params, *cand.params]):
        then, now = parse_digest(before), parse_digest(after)
        out += [(g, e, c, trial) for trial in sorted(then.keys() & now.keys())
                if then[trial][1] == now[trial][1] and then[trial][0] != now[trial][0]]
    return out


def paired_block(pairing: EvalPairing) -> dict[str, Any] | None:
    """The ``paired`` block of a comparison row, or None when pairing is undefined."""
    if pairing.ambiguous:
        return None
    result = paired_difference(pairing.diffs)
    if result is None:
        return None
    diffs = pairing.diffs
    block = {
        "n_cases": diffs.n_cases,
        "trials_max": diffs.trials_max,
        "difference": result.difference,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "method": result.method,
        "test": SIGN_FLIP,
        "p_value": result.p_value,
        "p_holm": result.p_value,
        "min_p": min_p(diffs.n_cases),
        "std_error": result.std_error,
        "mcnemar_p": mcnemar_exact_p(diffs.regressed, diffs.improved) if diffs.trials_max <= 1 else None,
        "regressed": list(pairing.regressed_cases),
        "improved": list(pairing.improved_cases),
        "judge_flips": list(pairing.judge_flips),
    }
    block["verdict"] = _verdict(block, result.p_value)
    return block


def unreachable(n_cases: int) -> str:
    """The verdict of a comparison whose cases are too few for any result to be significant."""
    return f"cannot reach p < {ALPHA:g} with {n_cases} case{'s' if n_cases != 1 else ''}"


def _verdict(block: Mapping[str, Any], p_value: float) -> str:
    """``regression`` / ``improvement`` when the one-sided test rejects "no change" at :data:`ALPHA`;
    with too few cases for any p-value below it, says so."""
    if block.get("min_p") is not None and block["min_p"] >= ALPHA:
        return unreachable(block["n_cases"])
    if p_value >= ALPHA or block["difference"] == 0:
        return "no significant change"
    return "regression" if block["difference"] < 0 else "improvement"


def adjust_family(rows: Sequence[dict[str, Any]], key: str = "paired") -> None:
    """Holm-adjust the p-values of comparisons gated together (``p_holm`` and ``verdict`` of each
    row's ``key`` block: the paired one, or the judge-corrected one).

    Args:
        rows: Comparison rows; those without a block, or whose block has no p-value, are not tests.
        key: Which block of each row.
    """
    blocks = [r[key] for r in rows if r.get(key) and r[key].get("p_value") is not None]
    for block, adjusted in zip(blocks, holm([b["p_value"] for b in blocks]), strict=True):
        block["p_holm"] = adjusted
        block["verdict"] = _verdict(block, adjusted)


def adjust_comparison(rows: Sequence[dict[str, Any]], overall: dict[str, Any], key: str = "paired") -> None:
    """Holm over the per-eval rows and the pooled row of one comparison, gated together.

    With one eval the pooled row is that eval again: it takes the eval's adjusted
    p-value and verdict instead of counting as a second test.
    """
    if len(rows) != 1:
        adjust_family([*rows, overall], key)
        return
    adjust_family(rows, key)
    if rows[0].get(key) and overall.get(key):
        overall[key].update(p_holm=rows[0][key].get("p_holm"), verdict=rows[0][key].get("verdict"))


def is_regression(paired: Mapping[str, Any] | None) -> bool:
    """True when the candidate is worse and the (Holm-adjusted) test rejects "no difference"."""
    return bool(paired) and paired["verdict"] == "regression"  # type: ignore[index]


def is_improvement(paired: Mapping[str, Any] | None) -> bool:
    """True when the candidate is better and the (Holm-adjusted) test rejects "no difference"."""
    return bool(paired) and paired["verdict"] == "improvement"  # type: ignore[index]


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


def pooled(pairings: Sequence[EvalPairing]) -> EvalPairing:
    """All evals pooled into one pairing (ambiguous if any eval is); each eval's cases are
    clusters of their own."""
    total = EvalPairing("*", "all evals")
    for p in pairings:
        total.base_total += p.base_total
        total.base_passed += p.base_passed
        total.cand_total += p.cand_total
        total.cand_passed += p.cand_passed
        total.diffs.add(p.diffs)
        total.ambiguous = total.ambiguous or p.ambiguous
        total.regressed_cases += [f"{p.eval_id}/{c}" for c in p.regressed_cases]
        total.improved_cases += [f"{p.eval_id}/{c}" for c in p.improved_cases]
        total.judge_flips += [f"{p.eval_id}/{c}" for c in p.judge_flips]
    return total
