"""Per eval × service × model figures of some runs: counts, the pass rate with its interval
clustered by case, pass^k, latency, time to first token, cost, and a judged target's judge fields.
They feed the gates, the terminal summary, the viewer and ``evaluate().stats``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evalhydra.analysis.aggregate import case_histograms
from evalhydra.analysis.evalstats import evals_and_targets
from evalhydra.analysis.judges import has_labels, judge_report
from evalhydra.analysis.runsummary import saved_summary_of
from evalhydra.analysis.selection import select_runs
from evalhydra.analysis.ttft import FirstToken, first_token_latency
from evalhydra.stats.clustered import pass_rate_interval
from evalhydra.stats.rates import pass_hat_k as pass_hat_k_of
from evalhydra.store.db import Store

__all__ = ["consistency", "store_stats"]


def store_stats(store: Store, run_ids: Sequence[str], *, pass_hat_k: int | None = None,
                judges: bool | None = None, summary: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per eval × service × model: counts, pass rate with its interval, pass^k, latency, errors, cost.

    The pass rate is the mean over cases of each case's pass fraction, its 95%
    interval clustered by case (:func:`~evalhydra.stats.clustered.pass_rate_interval`).
    A target a judge scored also gets the judge's fields and its pass rate corrected for the
    judge's errors (:func:`~evalhydra.analysis.judges.judge_report`: ``judge``, ``judge_labels``,
    ``judge_kappa``, ``corrected_pass_rate``, ``corrected_ci_low``/``high``,
    ``corrected_ci_method``, ``corrected_problem``).

    Args:
        store: The store.
        run_ids: The runs covered.
        pass_hat_k: k of ``pass_hat_k`` (default: the fewest scored trials of a case).
        judges: Add the judges' fields: always (True), never (False), or when the store holds
            labels (None).
        summary: The run summary of ``run_ids``, which names the targets' judges (default: the
            runs' saved summaries, else a pass over the results).
    """
    sel = select_runs(store.conn, run_ids)
    doc, targets = evals_and_targets(store.conn, sel)
    histograms = case_histograms(store.conn, sel)
    first_token = first_token_latency(store.conn, sel, targets.values())
    out = []
    for ev in doc["evals"]:
        for svc in ev["services"]:
            for model in svc["models"]:
                key = (ev["group"], ev["eval_id"], svc["service_name"], model["model"] or "")
                t, hist = targets[key], histograms.get(key, Counter())
                rate = pass_rate_interval(hist)
                k, hat = consistency(hist, pass_hat_k)
                latency = model["stats"]["latency"]
                out.append({
                    "group": ev["group"], "eval": ev["eval_id"], "service": svc["service_name"],
                    "model": model["model"], "n": t.n, "passed": t.passed, "errors": t.errors,
                    "scored": t.n - t.errors, "input_tokens": t.input_tokens,
                    "output_tokens": t.output_tokens, "pass_rate": rate.estimate, "ci_low": rate.low,
                    "ci_high": rate.high, "ci_method": rate.method, "n_cases": rate.n_cases,
                    "pass_hat_k": hat, "k": k,
                    "p50_ms": latency["p50_ms"], "p95_ms": latency["p95_ms"],
                    "reasoning_tokens": t.reasoning_tokens, **_first_token(first_token.get(key)),
                    "retried": model["stats"]["retries"]["retried_runs"], "cost_usd": t.cost_usd})
    if judges or (judges is None and has_labels(store.conn)):
        if summary is None:
            summary = saved_summary_of(store.conn, run_ids)
        fields = judge_report(store.conn, sel, histograms, summary=summary).targets
        for stat in out:
            stat.update(fields.get((stat["group"], stat["eval"], stat["service"], stat["model"] or ""), {}))
    return out


def _first_token(first: FirstToken | None) -> dict[str, float | None]:
    """A target's time-to-first-token percentiles (None without streamed answers)."""
    if first is None:
        return dict.fromkeys(("ttft_p50_ms", "ttft_p95_ms", "first_answer_p50_ms", "first_answer_p95_ms"))
    return {"ttft_p50_ms": first.p50_ms, "ttft_p95_ms": first.p95_ms,
            "first_answer_p50_ms": first.answer_p50_ms, "first_answer_p95_ms": first.answer_p95_ms}


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
