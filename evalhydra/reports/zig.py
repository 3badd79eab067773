"""zig_eval's text report (``report.txt``), from an ``evals.json`` document: the seed's
``eval <id> group=<g>`` blocks (:mod:`evalhydra.analysis.zigstats` computes the figures)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalhydra.core.zig_numbers import fixed

__all__ = ["format_text_report"]



def _summary_line(stats: Mapping[str, Any], indent: int) -> str:
    counts, latency, retries = stats["counts"], stats["latency"], stats["retries"]
    return (
        f"{' ' * indent}summary: total={counts['total_runs']} passed={counts['passed']}"
        f" failed={counts['failed']} pass_rate={fixed(stats['pass_rate'] * 100, 2)}%"
        f" ci95=[{fixed(stats['pass_rate_ci_low'] * 100, 2)}%, {fixed(stats['pass_rate_ci_high'] * 100, 2)}%]"
        f" mean_ms={fixed(latency['mean_ms'], 2)} p50_ms={latency['p50_ms']}"
        f" p95_ms={latency['p95_ms']} retried_runs={retries['retried_runs']}"
        f" total_attempts={retries['total_attempts']}"
    )


def _eval_block(report: Mapping[str, Any]) -> list[str]:
    lines = [f"eval {report['eval_id']} group={report['group']}", _summary_line(report["stats"], 2)]
    for service in report["services"]:
        lines += [f"  service {service['service_name']}", _summary_line(service["stats"], 4)]
        for model in service["models"]:
            lines += [f"    model {model['model']}", _summary_line(model["stats"], 6)]
    return lines


def format_text_report(evals_doc: Mapping[str, Any]) -> str:
    """Render an :func:`evals_json` document as zig_eval's text report.

    Every line ends with a newline; eval blocks are separated by a blank line;
    with no evals the report is ``No eval results.``.
    """
    if not evals_doc["evals"]:
        return "No eval results.\n"
    blocks = ["\n".join(_eval_block(report)) + "\n" for report in evals_doc["evals"]]
    return "\n".join(blocks)
