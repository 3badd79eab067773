"""``evalhydra power``'s figures: how many cases × trials a comparison needs to catch a drop
(:mod:`evalhydra.reports.power` prints them).

The variance of one case's paired difference comes from what is stored
(:mod:`evalhydra.stats.power` has the model and the formulas):

* two targets (``BASELINE CANDIDATE``, as for ``compare``): their observed
  per-case differences;
* one target: its per-case pass fractions, and an assumed correlation between
  two models' per-case pass probabilities (``--correlation``);
* nothing: assumptions alone (``--pass-rate``, ``--case-sd``, ``--correlation``).

For each trial count it gives the cases needed to detect a drop of
``--drop`` at ``--power`` with the gate's one-sided 5% test.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalhydra.analysis.compare import Side
from evalhydra.analysis.comparison import Target, compare, side_of
from evalhydra.analysis.selection import PASSED_SQL
from evalhydra.core.errors import EvalHydraError
from evalhydra.stats.power import (
    DEFAULT_CORRELATION,
    DEFAULT_POWER,
    MAX_CASES,
    VarianceModel,
    cases_needed,
    from_assumptions,
    from_differences,
    from_one_target,
)
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["Assumptions", "power_report"]

DEFAULT_TRIALS = (1, 3, 5, 10)


@dataclass(frozen=True)
class Assumptions:
    """What the user assumes where the store cannot tell."""

    pass_rate: float = 0.7
    case_sd: float | None = None
    correlation: float = DEFAULT_CORRELATION


def _histogram(conn: sqlite3.Connection, side: Side) -> Counter[tuple[int, int]]:
    sql = f"""select scored, ok, count(*) from (
        select count(*) - sum({INFRA_ERROR_SQL}) as scored, sum({PASSED_SQL}) as ok from results
        where {side.where} group by "group", eval_id, case_id, service_name, model)
      where scored > 0 group by scored, ok"""
    return Counter({(scored, ok): n for scored, ok, n in conn.execute(sql, side.params)})


def _model(conn: sqlite3.Connection | None, targets: Sequence[Target], evals: Sequence[str],
           drop: float, assume: Assumptions) -> tuple[VarianceModel, dict[str, Any] | None]:
    """The variance model, and what the stored comparison can detect now (two targets)."""
    if len(targets) == 2 and conn is not None:
        result = compare(conn, targets[0], targets[1], evals)
        model = from_differences(result.diffs)
        if model is None:
            raise EvalHydraError("The two targets share fewer than two scored cases.",
                                 "Compare runs of the same evals.")
        return model, result.precision
    if len(targets) == 1 and conn is not None:
        model = from_one_target(_histogram(conn, side_of(targets[0], evals)), drop, assume.correlation)
        if model is None:
            raise EvalHydraError(f"The target {targets[0].label} has fewer than two scored cases.",
                                 "Name a run with more cases, or give --pass-rate instead.")
        return model, None
    return from_assumptions(assume.pass_rate, drop, assume.case_sd, assume.correlation), None


def power_report(conn: sqlite3.Connection | None, targets: Sequence[Target], *,
                 evals: Sequence[str] = (), drop: float = 0.05, power: float = DEFAULT_POWER,
                 trials: Sequence[int] = DEFAULT_TRIALS,
                 assume: Assumptions = Assumptions()) -> dict[str, Any]:
    """The cases needed per trial count to detect ``drop`` with ``power``.

    Args:
        conn: A connection to the store (None: assumptions only).
        targets: None, one or two targets.
        evals: Only these eval ids.
        drop: The drop to detect, as a fraction (0.05 = 5 points).
        power: Target power.
        trials: Trial counts to tabulate.
        assume: Assumptions for what the store cannot tell.

    Raises:
        EvalHydraError: On an impossible request or too little stored data.
    """
    _check_request(drop, power, trials, assume)
    model, now = _model(conn, targets, evals, drop, assume)
    rows = [_row(k, model.sd(k), cases_needed(model.sd(k), drop, power)) for k in trials]
    return {"drop": drop, "power": power, "source": model.source, "separable": model.separable,
            "between_case_variance": model.between, "within_case_variance": model.within,
            "rows": rows, "now": now}


#: The most power asked for: past it the t quantiles run out of float precision.
MAX_POWER = 0.9999
#: The most trials per case tabulated.
MAX_TRIALS = 100_000


def _check_request(drop: float, power: float, trials: Sequence[int], assume: Assumptions) -> None:
    """Refuse numbers outside what the calculation means (NaN fails every comparison here).

    Raises:
        EvalHydraError: Naming the option, what is wrong, and a value that works.
    """
    if not 0 < drop < 1:
        raise EvalHydraError(f"--drop {drop}: must be a fraction in (0, 1), e.g. 0.05 for 5 points.")
    if not 0.5 <= power <= MAX_POWER:
        raise EvalHydraError(f"--power {power}: must be in [0.5, {MAX_POWER}], e.g. 0.8.")
    if any(not 1 <= k <= MAX_TRIALS for k in trials):
        raise EvalHydraError(f"--trials: every trial count must be in 1..{MAX_TRIALS:,}.")
    if not 0 < assume.pass_rate < 1:
        raise EvalHydraError(f"--pass-rate {assume.pass_rate}: must be a fraction in (0, 1), e.g. 0.7.")
    if assume.case_sd is not None and not 0 <= assume.case_sd <= 0.5:
        raise EvalHydraError(f"--case-sd {assume.case_sd}: must be in [0, 0.5] (the SD of probabilities), "
                             "e.g. 0.3.")
    if not -1 <= assume.correlation <= 1:
        raise EvalHydraError(f"--correlation {assume.correlation}: must be in [-1, 1], e.g. 0.5.")


def _row(trials: int, sd: float, cases: int) -> dict[str, Any]:
    """One trial count's row; past the search's bound the counts are None and ``beyond`` says
    the bound ("more than MAX_CASES cases")."""
    if cases > MAX_CASES:
        return {"trials": trials, "case_sd": sd, "cases": None, "results_per_side": None,
                "beyond": MAX_CASES}
    return {"trials": trials, "case_sd": sd, "cases": cases, "results_per_side": cases * trials,
            "beyond": None}
