"""Each judged eval's judge as measured before a run: what its verdicts' telemetry events carry."""

from __future__ import annotations

from evalhydra.analysis.judges import calibrations
from evalhydra.matchers.factory import judge_services_of, judge_settings
from evalhydra.plan.model import RunPlan
from evalhydra.stats.judge import Agreement
from evalhydra.store.db import Store

__all__ = ["judge_figures"]


def judge_figures(store: Store, plan: RunPlan) -> dict[str, tuple[float | None, float | None, int]]:
    """Per eval scored by one judge: that judge's sensitivity, specificity and label count against
    the labels the store holds now (its verdicts in earlier runs; an eval without labels: 0)."""
    keys = {}
    for ev in plan.evals:
        names = judge_services_of(ev.matcher)
        if len(names) != 1:
            continue
        name = next(iter(names))
        config = plan.judges.get(name) or plan.service
        keys[ev.id] = (ev.id, name, config.model or config.default_model, judge_settings(ev.matcher) or "")
    found = calibrations(store.conn, keys.values(), resamples=0)
    return {eval_id: _figures(found[key].agreement) for eval_id, key in keys.items()}


def _figures(agreement: Agreement) -> tuple[float | None, float | None, int]:
    return agreement.sensitivity, agreement.specificity, agreement.n
