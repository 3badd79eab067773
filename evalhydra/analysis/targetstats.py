"""Per eval × service × model figures of some runs: counts, the pass rate with its interval
clustered by case, pass^k, latency, time to first token, cost, and a judged target's judge fields.
They feed the gates, the terminal summary, the viewer and ``evaluate().stats``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from evalhydra.analysis.aggregate import case_histograms
from evalhydra.analysis.evalstats import Totals, evals_and_targets
from evalhydra.analysis.judges import has_labels, judge_report
from evalhydra.analysis.runsummary import saved_summary_of, summary_histograms
from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.ttft import FirstToken, first_token_latency
from evalhydra.stats.clustered import pass_rate_interval
from evalhydra.stats.rates import pass_hat_k as pass_hat_k_of
from evalhydra.store.db import Store

__all__ = ["JudgeFields", "TargetStats", "consistency", "store_stats"]


@dataclass(slots=True)
class JudgeFields:
    """What a judged target adds (:func:`~evalhydra.analysis.judges.judge_report`): its judge, the
    judge's labels and agreement, and the pass rate corrected for the judge's errors."""

    judge: str | None
    judge_labels: int
    judge_kappa: float | None
    judge_sensitivity: float | None
    judge_specificity: float | None
    judge_self_consistency: float | None
    corrected_pass_rate: float | None
    corrected_ci_low: float | None
    corrected_ci_high: float | None
    corrected_ci_method: str | None
    corrected_problem: str | None


@dataclass(slots=True)
class TargetStats:
    """One eval × service × model's figures.

    ``pass_rate`` is the mean over cases of each case's pass fraction (0 without a scored cell:
    read ``scored`` first), ``ci_low``/``ci_high`` its 95 % interval clustered by case
    (``ci_method``); ``scored`` counts the results without an infrastructure error;
    ``pass_hat_k``: of a random case, the chance that ``k`` trials all pass; ``judged``: the
    judge's fields of a target a judge scored, when the store holds labels (or a judge gate asks).
    """

    group: str
    eval: str
    service: str
    model: str | None
    n: int
    passed: int
    errors: int
    scored: int
    input_tokens: int
    output_tokens: int
    pass_rate: float
    ci_low: float
    ci_high: float
    ci_method: str
    n_cases: int
    pass_hat_k: float | None
    k: int
    p50_ms: int
    p95_ms: int
    reasoning_tokens: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    first_answer_p50_ms: float | None
    first_answer_p95_ms: float | None
    retried: int
    cost_usd: float
    judged: JudgeFields | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(group, eval, service, model or "")."""
        return self.group, self.eval, self.service, self.model or ""

    def as_dict(self) -> dict[str, Any]:
        """The figures as one flat mapping, the judge's fields beside them when judged: the shape
        of ``evaluate().stats`` and the JSON documents."""
        out = {f: getattr(self, f) for f in _FLAT}
        if self.judged is not None:
            out.update({f: getattr(self.judged, f) for f in _JUDGE})
        return out


_FLAT = tuple(f.name for f in fields(TargetStats) if f.name != "judged")
_JUDGE = tuple(f.name for f in fields(JudgeFields))


def store_stats(store: Store, run_ids: Sequence[str], *, pass_hat_k: int | None = None,
                judges: bool | None = None, summary: Mapping[str, Any] | None = None,
                totals: Totals | None = None) -> list[TargetStats]:
    """Per eval × service × model: counts, pass rate with its interval, pass^k, latency, errors, cost.

    The pass rate is the mean over cases of each case's pass fraction, its 95%
    interval clustered by case (:func:`~evalhydra.stats.clustered.pass_rate_interval`).
    A target a judge scored also gets the judge's fields and its pass rate corrected for the
    judge's errors (:class:`JudgeFields`).

    Args:
        store: The store.
        run_ids: The runs covered.
        pass_hat_k: k of ``pass_hat_k`` (default: the fewest scored trials of a case).
        judges: Add the judges' fields: always (True), never (False), or when the store holds
            labels (None).
        summary: The run summary of ``run_ids``, which names the targets' judges (default: the
            runs' saved summaries, else a pass over the results).
        totals: :func:`~evalhydra.analysis.evalstats.evals_and_targets` of ``run_ids``, when the
            reports have computed them (default: computed here).
    """
    sel = select_runs(store.conn, run_ids)
    doc, targets = totals if totals is not None else evals_and_targets(store.conn, sel)
    # the run summary holds the case histograms of the same selection: no second grouping pass
    histograms = summary_histograms(summary) if summary is not None else case_histograms(store.conn, sel)
    first_token = first_token_latency(store.conn, sel, targets.values())
    out = []
    for ev in doc["evals"]:
        for svc in ev["services"]:
            for model in svc["models"]:
                key = (ev["group"], ev["eval_id"], svc["service_name"], model["model"] or "")
                t, hist = targets[key], histograms.get(key, Counter())
                rate = pass_rate_interval(hist)
                k, hat = consistency(hist, pass_hat_k)
                latency, ttft = model["stats"]["latency"], _first_token(first_token.get(key))
                out.append(TargetStats(
                    ev["group"], ev["eval_id"], svc["service_name"], model["model"], n=t.n, passed=t.passed,
                    errors=t.errors, scored=t.n - t.errors, input_tokens=t.input_tokens,
                    output_tokens=t.output_tokens, pass_rate=rate.estimate, ci_low=rate.low,
                    ci_high=rate.high, ci_method=rate.method, n_cases=rate.n_cases, pass_hat_k=hat, k=k,
                    p50_ms=latency["p50_ms"], p95_ms=latency["p95_ms"], reasoning_tokens=t.reasoning_tokens,
                    ttft_p50_ms=ttft[0], ttft_p95_ms=ttft[1], first_answer_p50_ms=ttft[2],
                    first_answer_p95_ms=ttft[3], retried=model["stats"]["retries"]["retried_runs"],
                    cost_usd=t.cost_usd))
    if judges or (judges is None and has_labels(store.conn)):
        if summary is None:
            summary = saved_summary_of(store.conn, run_ids)
        found = judge_report(store.conn, sel, histograms, summary=summary).targets
        for stat in out:
            if stat.key in found:
                stat.judged = JudgeFields(**found[stat.key])
    return out


def _first_token(first: FirstToken | None) -> tuple[float | None, ...]:
    """A target's time-to-first-token and first-answer percentiles (None without streamed answers)."""
    if first is None:
        return None, None, None, None
    return first.p50_ms, first.p95_ms, first.answer_p50_ms, first.answer_p95_ms


def consistency(hist: Mapping[tuple[int, int], int], k: int | None) -> tuple[int, float | None]:
    """pass^k averaged over cases: the chance that k trials of a random case all pass.

    k is the requested one, but never more than the fewest scored trials of a case
    (pass^k is not defined beyond); (0, None) when nothing was scored.
    """
    if not hist:
        return 0, None
    fewest = min(n for n, _ in hist)
    k = fewest if k is None else max(1, min(k, fewest))
    cases = sum(hist.values())
    return k, sum(w * pass_hat_k_of(n, c, k) for (n, c), w in hist.items()) / cases
