"""The one-screen terminal summary and the CI gates, computed in SQL.

Gates (:class:`Gates`): ``run.fail_under`` (every eval × service × model),
per-eval thresholds (a mapping from eval id, or group, to a minimum pass rate;
an eval id wins over its group, which wins over ``fail_under``), and
``run.fail_under_pass_hat_k`` (a minimum pass^k). A gate compares the pass
rate over scored results (the mean over cases of each case's pass fraction):
infrastructure errors are reported apart and never lower it. When
``$GITHUB_STEP_SUMMARY`` is set, the run's short ``summary.md`` is appended to it.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from evalhydra.core.text import command_line, visible
from evalhydra.core.usercode import USER_THREADS
from evalhydra.reports.aggregate import case_histograms
from evalhydra.reports.evalstats import evals_and_targets
from evalhydra.reports.graders import grader_rows
from evalhydra.reports.judges import has_labels, judge_report
from evalhydra.reports.runsummary import saved_summary_of
from evalhydra.reports.selection import select_runs
from evalhydra.reports.ttft import FirstToken, first_token_latency
from evalhydra.stats.clustered import CLUSTERED_WILSON, pass_rate_interval
from evalhydra.stats.rates import pass_hat_k as pass_hat_k_of
from evalhydra.store.db import Store
from evalhydra.store.rows import INFRA_ERROR_SQL, infra_error_sql

__all__ = [
    "Gates",
    "append_step_summary",
    "consistency",
    "error_reasons",
    "failing_cases",
    "escape_md",
    "failing_stats",
    "corrected_rows",
    "gate_text",
    "gate_verdict_md",
    "plural",
    "print_corrected",
    "print_gate_failures",
    "print_run_summary",
    "run_gate",
    "store_stats",
    "threshold_for",
]


DASH = "—"


def _table(stats: Sequence[dict[str, Any]], tablefmt: str) -> str:
    streamed = any(s.get("ttft_p50_ms") is not None for s in stats)
    table = [[s["eval"], s["service"], s["model"], s["n"], s["n_cases"], *_rate_cells(s), s["p50_ms"],
              s["p95_ms"], *(_ttft_cells(s) if streamed else []), s["retried"], s["errors"]] for s in stats]
    headers = ["eval", "service", "model", "n", "cases", "pass", "95% CI", "p50 ms", "p95 ms",
               *(["ttft p50", "ttft p95"] if streamed else []), "retried", "errors"]
    return tabulate(table, headers=headers, tablefmt=tablefmt)


def _ttft_cells(stat: Mapping[str, Any]) -> list[str]:
    """Time to first token next to the latency (a target that did not stream has none)."""
    if stat.get("ttft_p50_ms") is None:
        return [DASH, DASH]
    return [f"{stat['ttft_p50_ms']:.0f}", f"{stat['ttft_p95_ms']:.0f}"]


def _rate_cells(stat: Mapping[str, Any]) -> list[str]:
    """Pass rate and interval; a target with no scored cell has neither (not 0 %)."""
    if not stat["scored"]:
        return [DASH, DASH]
    return [f"{stat['pass_rate']:.1%}", f"[{stat['ci_low']:.1%}, {stat['ci_high']:.1%}]"]


def store_stats(store: Store, run_ids: Sequence[str], *, pass_hat_k: int | None = None,
                judges: bool | None = None, summary: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per eval × service × model: counts, pass rate with its interval, pass^k, latency, errors, cost.

    The pass rate is the mean over cases of each case's pass fraction, its 95%
    interval clustered by case (:func:`~evalhydra.stats.clustered.pass_rate_interval`).
    A target a judge scored also gets the judge's fields and its pass rate corrected for the
    judge's errors (:func:`~evalhydra.reports.judges.judge_report`: ``judge``, ``judge_labels``,
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


def print_run_summary(store: Store, outcome: Any, out_dir: Path, *, header: str | None = None,
                      hints: Sequence[str] = (), pass_hat_k: int | None = None,
                      judges: bool | None = None,
                      summary: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Print a run's one-screen summary (computed in SQL); return the stats for :func:`run_gate`.

    In order: ``header`` (the registry and store used), the per-target table, the
    top error reasons per target, up to five failing cases with the command that
    lists the rest, the totals (duration, tokens, cost, stored errors reused),
    ``hints`` (a fix per problem), and where the reports are. ``summary`` (the run's
    :func:`~evalhydra.reports.runsummary.run_summary`) names the targets' judges.
    """
    stats = store_stats(store, [outcome.run_id], pass_hat_k=pass_hat_k, judges=judges, summary=summary)
    if header:
        print(header)
    print(visible(_table(stats, "simple")))
    if any(s["ci_method"] == CLUSTERED_WILSON for s in stats):
        print("pass rate: mean over cases of each case's pass fraction; 95% CI clustered by case")
    _print_graders(grader_rows(store.conn, select_runs(store.conn, [outcome.run_id])))
    print_corrected(stats)
    _print_errors(error_reasons(store, [outcome.run_id]))
    _print_failing(failing_cases(store, [outcome.run_id]), outcome.run_id)
    _print_totals(store, outcome, stats)
    for hint in hints:
        print(f"fix: {hint}")
    print(f"reports: {out_dir}")
    return stats


def corrected_rows(stats: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per judged target: the judge, its labels and κ, the judged and the corrected pass rate."""
    rows = []
    for s in stats:
        if "corrected_pass_rate" not in s or not s["scored"]:
            continue
        fixed = (f"{s['corrected_pass_rate']:.1%} [{s['corrected_ci_low']:.1%}, {s['corrected_ci_high']:.1%}]"
                 if s["corrected_pass_rate"] is not None else s["corrected_problem"] or DASH)
        rows.append({"eval": s["eval"], "target": f"{s['service']}/{s['model'] or ''}",
                     "judge": s["judge"] or DASH, "labels": s["judge_labels"],
                     "kappa": DASH if s["judge_kappa"] is None else f"{s['judge_kappa']:.2f}",
                     "judged pass": f"{s['pass_rate']:.1%}", "corrected [95% CI]": fixed})
    return rows


def print_corrected(stats: Sequence[Mapping[str, Any]]) -> None:
    """The judge-corrected pass rates, when a judge scored a target and the store holds labels."""
    rows = corrected_rows(stats)
    if not rows:
        return
    print("\njudge-corrected pass rates (Rogan-Gladen; 95% CI carries the cases' and the labels' variance):")
    print(visible(tabulate(rows, headers="keys", tablefmt="simple")))


def _print_graders(rows: Sequence[Mapping[str, Any]]) -> None:
    """Each OpenAI Evals criterion's pass rate and mean score per target (nothing without any)."""
    if not rows:
        return
    table = [{"eval": g["eval"], "target": f"{g['service']}/{g['model']}", "grader": g["grader"],
              "results": g["n"], "pass": f"{100 * g['pass_rate']:.1f}%",
              "mean score": DASH if g["mean_score"] is None else f"{g['mean_score']:.4g}"} for g in rows]
    print("graders (each testing criterion; a result passes when all pass):")
    print(visible(tabulate(table, headers="keys", tablefmt="simple")))


Reasons = dict[tuple[str, str, str], list[tuple[str, int]]]


def error_reasons(store: Store, run_ids: Sequence[str], limit: int = 3) -> Reasons:
    """Per eval × service × model, the most frequent infrastructure-error reasons with their cell counts.

    A reason is the last HTTP attempt's message when there is one (``ConnectError: all
    attempts to connect to 127.0.0.1:9 failed``), else the stored failure reason.
    """
    sel = select_runs(store.conn, run_ids)
    sql = f"""select eval_id, service_name, coalesce(model, ''), coalesce(
          (select a.error_message from attempts a where a.cell_key = results.cell_key
             and a.error_message is not null order by a.rowid desc limit 1),
          failure_reason, error_kind, status) as reason, count(*) as n
        from {sel.table} where ({sel.where}) and {INFRA_ERROR_SQL}
        group by 1, 2, 3, 4 order by 1, 2, 3, n desc, reason"""
    out: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for eval_id, service, model, reason, n in store.conn.execute(sql, sel.params):
        reasons = out.setdefault((eval_id, service, model), [])
        if len(reasons) < limit:
            reasons.append((str(reason), int(n)))
    return out


def failing_cases(store: Store, run_ids: Sequence[str], limit: int = 5) -> list[dict[str, Any]]:
    """Scored failures (not infrastructure errors), the first ``limit`` in eval and case order."""
    sel = select_runs(store.conn, run_ids)
    sql = f"""select eval_id, service_name, model, case_id, run_index, failure_reason, ideal,
        substr(output, 1, 200) as output
        from {sel.table} where ({sel.where}) and not passed and not {INFRA_ERROR_SQL}
        order by eval_id, service_name, model, case_id, run_index limit ?"""
    return list(store.query(sql, [*sel.params, limit + 1]))


def _print_errors(reasons: Reasons) -> None:
    """One line per (service, model, reason): the same failure across many evals is one line."""
    if not reasons:
        return
    print("\nerrors (infrastructure: neither passed nor failed):")
    grouped: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for (eval_id, service, model), items in reasons.items():
        for reason, n in items:
            grouped.setdefault((service, model, reason), []).append((eval_id, n))
    for (service, model, reason), evals in grouped.items():
        cells = sum(n for _, n in evals)
        where = evals[0][0] if len(evals) == 1 else f"{len(evals)} evals"
        print(visible(f"  {where} on {service}/{model}: {reason} — {plural(cells, 'cell')}", lines=False))


def plural(n: int, noun: str) -> str:
    """``1 cell``, ``2 cells``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _print_failing(rows: Sequence[Mapping[str, Any]], run_id: str, limit: int = 5) -> None:
    if not rows:
        return
    print("\nfailing cases:")
    for r in rows[:limit]:
        reason = textwrap.shorten(r["failure_reason"], 100, placeholder=" …") if r["failure_reason"] else ""
        print(visible(f"  {r['eval_id']} {r['case_id']} trial {r['run_index']} on {r['service_name']}/"
                      f"{r['model']}: {reason}".rstrip(": ") + both_sides(r), lines=False))
    if len(rows) > limit:
        print(f"  … more: {command_line('evalhydra', 'results', run_id, '--status', 'FAIL')}")


def _quoted(text: Any) -> str:
    """``'text'`` on one line, cut at 60 characters."""
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= 60 else flat[:59] + "…")


def both_sides(row: Mapping[str, Any]) -> str:
    """`` (expected 'Vienna' in output 'Springfield')``: what was expected and what came, for a
    failing case's line; the output alone when the case has no ideal."""
    output = row.get("output")
    if output is None:
        return ""
    ideal = row.get("ideal")
    if ideal is None:
        return f" (output {_quoted(output)})"
    joint = " in" if "includ" in str(row.get("failure_reason") or "") else ","
    return f" (expected {_quoted(ideal)}{joint} output {_quoted(output)})"


def _print_totals(store: Store, outcome: Any, stats: Sequence[Mapping[str, Any]]) -> None:
    total, passed = sum(s["n"] for s in stats), sum(s["passed"] for s in stats)
    errors = sum(s["errors"] for s in stats)
    tokens = sum(s["input_tokens"] + s["output_tokens"] for s in stats)
    thinking = sum(s["reasoning_tokens"] for s in stats)
    cost = sum(s["cost_usd"] for s in stats)
    duration = _duration_s(store, outcome.run_id)
    print(f"\nrun {outcome.run_id}: {plural(total, 'cell')}, {passed} passed, {total - passed - errors} "
          f"failed, {plural(errors, 'error')} ({outcome.executed} run now, {outcome.skipped} resumed from "
          "the store)")
    spent = f" ({thinking} of them thinking)" if thinking else ""
    print(f"duration {duration:.1f} s, {tokens} tokens{spent}, ${cost:.4f}")
    _print_held(outcome)
    _print_cache_hits(store, outcome.run_id)
    _print_batched(store, outcome.run_id)
    _print_reused(store, outcome.run_id)
    if USER_THREADS.report():
        print(USER_THREADS.report())
    reused = _reused_errors(store, outcome.run_id)
    if reused:
        print(f"{reused} stored error{'s' if reused != 1 else ''} reused from earlier runs; "
              "re-send them with run.retry_errors=true (a 4xx too: run.retry_errors=all)")


def reused_results(store: Store, run_id: str) -> list[tuple[str, str, int]]:
    """The earlier runs whose stored results this run took instead of asking again: (run id, when
    it started, cells), oldest first."""
    return [(str(r), str(at), int(n)) for r, at, n in store.conn.execute(
        "select rc.result_run_id, coalesce(ru.started_at, ''), count(*) from run_cells rc"
        " left join runs ru on ru.run_id = rc.result_run_id"
        " where rc.run_id = ? and rc.result_run_id != rc.run_id"
        " group by rc.result_run_id order by ru.started_at, rc.result_run_id", [run_id])]


def _print_reused(store: Store, run_id: str) -> None:
    """Where the cells this run did not send came from, and how to send them again."""
    found = reused_results(store, run_id)
    if not found:
        return
    shown = ", ".join(f"{n} from {r} ({at[:19].replace('T', ' ')})" for r, at, n in found[:3])
    more = f", and {len(found) - 3} more run(s)" if len(found) > 3 else ""
    print(f"{plural(sum(n for _, _, n in found), 'stored result')} reused, not asked again: {shown}{more};"
          " ask again with run.fresh=true (only the failed cases: run.rerun=failed), or name what"
          " changed behind the URL with service.revision=…")


def _print_held(outcome: Any) -> None:
    """Cells this run left to another live run on the same store (see :mod:`evalhydra.store.claims`)."""
    held = getattr(outcome, "held_elsewhere", 0)
    if not held:
        return
    cells = f"{held} pending cell{'s' if held != 1 else ''}"
    holders = f"run{'s' if len(outcome.holders) != 1 else ''} {', '.join(sorted(outcome.holders))}"
    if outcome.executed:
        print(f"{cells} left to {holders}: another process on this store is sending them; "
              "its report has them.")
    else:
        print(f"nothing to claim: {holders} (another process on this store) holds all {cells}; "
              "its report will have them.")


def _duration_s(store: Store, run_id: str) -> float:
    row = store.conn.execute(
        "select (julianday(coalesce(finished_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))"
        " - julianday(started_at)) * 86400 from runs where run_id = ?", [run_id]).fetchone()
    return float(row[0] or 0.0) if row else 0.0


def _print_cache_hits(store: Store, run_id: str) -> None:
    """How many of the run's answers the response cache gave, and what they would have cost."""
    sql = """select count(*), coalesce(sum(r.saved_usd), 0) from run_cells rc
        join results r on r.cell_key = rc.cell_key
          and r.run_id = rc.result_run_id where rc.run_id = ? and r.run_id = ? and r.cached = 1"""
    hits, saved = store.conn.execute(sql, [run_id, run_id]).fetchone()
    if hits:
        print(f"cache: {plural(hits, 'answer')} from the response cache (nothing sent), ${saved:.4f} not paid"
              " again; cache.enabled=false measures the model afresh")


def _print_batched(store: Store, run_id: str) -> None:
    """How many of the run's cells batch jobs answered, and what the batch price saved."""
    sql = """select count(*), coalesce(sum(r.saved_usd), 0), coalesce(sum(r.cost_usd), 0) from run_cells rc
        join results r on r.cell_key = rc.cell_key
          and r.run_id = rc.result_run_id where rc.run_id = ? and r.run_id = ? and r.batched = 1"""
    cells, saved, paid = store.conn.execute(sql, [run_id, run_id]).fetchone()
    if cells:
        print(f"batch: {plural(cells, 'cell')} answered through batch jobs, ${paid:.4f} paid,"
              f" ${saved:.4f} saved against the online price")


def _reused_errors(store: Store, run_id: str) -> int:
    """Infrastructure errors stored by an earlier run that this run kept instead of re-sending."""
    sql = f"""select count(*) from run_cells rc join results r on r.cell_key = rc.cell_key
      and r.run_id = rc.result_run_id
        where rc.run_id = ? and r.run_id != ? and {infra_error_sql("r.")}"""
    return int(store.conn.execute(sql, [run_id, run_id]).fetchone()[0])


def append_step_summary(out_dir: Path) -> bool:
    """Append ``out_dir/summary.md`` to ``$GITHUB_STEP_SUMMARY`` when both exist."""
    target = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    source = Path(out_dir) / "summary.md"
    if not target or not source.exists():
        return False
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(source.read_text(encoding="utf-8") + "\n")
    return True


def gate_verdict_md(failing: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]) -> str:
    """The gates' verdict as Markdown for ``summary.md``: passed, or what failed and the first
    failing cases."""
    if not failing:
        return "\n**Gates passed.**\n"
    lines = ["", f"**Gate failed** ({plural(len(failing), 'target')} under a threshold):", ""]
    lines += [f"- `{escape_md(s['eval'])}` on `{escape_md(s['service'])}/{escape_md(s['model'] or '')}`: "
              f"{gate_text(s)}" for s in failing[:10]]
    if cases:
        lines += ["", "Failing cases:", ""]
        lines += [f"- `{escape_md(c['eval_id'])}` `{escape_md(c['case_id'])}` trial {c['run_index']}: "
                  f"{escape_md(textwrap.shorten(c['failure_reason'] or '', 100, placeholder=' …'))}"
                  for c in cases[:10]]
    return "\n".join(lines) + "\n"


def escape_md(value: Any) -> str:
    """Text made safe inside Markdown code spans and list items: one line, no backticks."""
    return visible(str(value), lines=False).replace("`", "'")


def threshold_for(stat: Mapping[str, Any], fail_under: float | None,
                  per_eval: Mapping[str, float] | None) -> float | None:
    """The minimum pass rate of one eval: its id's, else its group's, else ``fail_under``."""
    per_eval = per_eval or {}
    for key in (stat.get("eval"), stat.get("group")):
        if key is not None and key in per_eval:
            return float(per_eval[key])
    return fail_under


@dataclass(frozen=True)
class Gates:
    """A run's CI gates: the minimum pass rates and the per-case consistency gate.

    Attributes:
        fail_under: Minimum pass rate of every target (``run.fail_under``).
        per_eval: Minimum pass rate per eval id or group (``run.fail_under_per_eval``).
        pass_hat_k_under: Minimum pass^k (``run.fail_under_pass_hat_k``): of a random
            case, the chance that k trials all pass.
        pass_hat_k: k of that gate (``run.pass_hat_k``; default: the fewest trials of a case).
        require_judge_labels: A target a judge scored fails unless the judge has at least this
            many labelled outputs (``run.require_judge_labels``).
        min_judge_kappa: ... and unless its Cohen's κ with the labels is at least this
            (``run.min_judge_kappa``).
    """

    fail_under: float | None = None
    per_eval: Mapping[str, float] = field(default_factory=dict)
    pass_hat_k_under: float | None = None
    pass_hat_k: int | None = None
    require_judge_labels: int | None = None
    min_judge_kappa: float | None = None

    @classmethod
    def from_run(cls, run: Mapping[str, Any]) -> Gates:
        """The gates of a run's ``run`` section (a config mapping, as stored or composed)."""
        return cls(run.get("fail_under"), dict(run.get("fail_under_per_eval") or {}),
                   run.get("fail_under_pass_hat_k"), run.get("pass_hat_k"), run.get("require_judge_labels"),
                   run.get("min_judge_kappa"))

    @property
    def judged(self) -> bool:
        """Whether a gate asks about the judges."""
        return self.require_judge_labels is not None or self.min_judge_kappa is not None

    @property
    def active(self) -> bool:
        """Whether any gate is set."""
        return (self.fail_under is not None or bool(self.per_eval) or self.pass_hat_k_under is not None
                or self.judged)


def gate_text(failed: Mapping[str, Any]) -> str:
    """``pass rate 50.0% < 90.0%``, ``judge labels 12 < 50``: what a failing gate measured."""
    shape = failed.get("shape", ".1%")
    value = DASH if failed["value"] is None else format(failed["value"], shape)
    return f"{failed['metric']} {value} < {format(failed['threshold'], shape)}"


def print_gate_failures(failing: Sequence[dict[str, Any]], top_fix: str | None) -> None:
    """Print the worst failing gates (at most five) and the most common suggested fix."""
    for s in failing[:5]:
        print(visible(f"⚠ {s['eval']} on {s['service']}/{s['model']}: {gate_text(s)}", lines=False),
              file=sys.stderr)
    if len(failing) > 5:
        print(f"⚠ … and {len(failing) - 5} more below their threshold", file=sys.stderr)
    if failing and top_fix:
        print(visible(f"top suggested fix: {top_fix}", lines=False), file=sys.stderr)


def failing_stats(stats: Iterable[dict[str, Any]], gates: Gates) -> list[dict[str, Any]]:
    """Targets under a gate, worst first, each with its ``metric``, ``value`` and ``threshold``.

    A target with no scored cell has no pass rate: it is the "could not measure"
    exit, not a failed gate.
    """
    failing = []
    for s in stats:
        if not s.get("scored", 1):
            continue
        limit = threshold_for(s, gates.fail_under, gates.per_eval)
        if limit is not None and not s["pass_rate"] >= limit:  # written so that a NaN fails
            failing.append({**s, "metric": "pass rate", "value": s["pass_rate"], "threshold": limit})
        hat = s.get("pass_hat_k")
        if gates.pass_hat_k_under is not None and hat is not None and not hat >= gates.pass_hat_k_under:
            failing.append({**s, "metric": f"pass^{s['k']}", "value": hat,
                            "threshold": gates.pass_hat_k_under})
        failing += _judge_failures(s, gates)
    return sorted(failing, key=lambda s: (s["value"] is not None, (s["value"] or 0) - s["threshold"],
                                          s["eval"], s["metric"]))


def _judge_failures(stat: dict[str, Any], gates: Gates) -> list[dict[str, Any]]:
    """A judged target's judge gates: too few labels, or too little agreement with them."""
    if "judge_labels" not in stat:
        return []
    out = []
    labels, kappa = stat["judge_labels"], stat["judge_kappa"]
    if gates.require_judge_labels is not None and labels < gates.require_judge_labels:
        out.append({**stat, "metric": f"judge labels ({stat['judge'] or 'several judges'})", "value": labels,
                    "threshold": gates.require_judge_labels, "shape": "d"})
    if gates.min_judge_kappa is not None and not (kappa is not None and kappa >= gates.min_judge_kappa):
        out.append({**stat, "metric": f"judge kappa ({stat['judge'] or 'several judges'})", "value": kappa,
                    "threshold": gates.min_judge_kappa, "shape": ".3f"})
    return out


def run_gate(store: Store, run_ids: Sequence[str], gates: Gates,
             stats: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Targets under a gate (worst first, see :func:`failing_stats`); prints them and the
    most common suggested fix. Exit 1 when this returns anything."""
    if stats is None:
        stats = store_stats(store, run_ids, pass_hat_k=gates.pass_hat_k, judges=gates.judged or None)
    failing = failing_stats(stats, gates)
    top = None
    if failing:
        sel = select_runs(store.conn, run_ids)
        row = store.conn.execute(
            f"select suggested_fix, count(*) as n from {sel.table} where ({sel.where}) and not passed"
            " and coalesce(suggested_fix, '') != '' group by suggested_fix order by n desc,"
            " suggested_fix limit 1", sel.params).fetchone()
        top = row[0] if row else None
    print_gate_failures(failing, top)
    return failing
