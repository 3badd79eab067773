"""Reference implementation (tests only): zrb-llm-evaluator's results.json and ``list`` output from
in-memory trials, as zrb writes them. (zrb's report.md is shipped, :mod:`evalhydra.reports.zrb_markdown`,
and tested against zrb-llm-evaluator's own renderer.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalhydra.agents.models import TrialResult

__all__ = ["list_table", "results_json"]


def results_json(results: Iterable[TrialResult | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return results as the seed's ``results.json`` list (seed keys only)."""
    return [_row(r) for r in results]


def _row(result: TrialResult | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(result, TrialResult):
        return result.to_dict()
    return TrialResult.from_dict(result).to_dict()


def list_table(results: Iterable[TrialResult | Mapping[str, Any]]) -> str:
    """Return the seed's ``list`` output: model, case, trial, status, duration."""
    rows = results_json(results)
    lines = [
        f"Found {len(rows)} trial(s):",
        "",
        f"{'Model':<30} {'Test Case':<20} {'Trial':<6} {'Status':<12} {'Duration':<10}".rstrip(),
        "-" * 80,
    ]
    for r in rows:
        lines.append(
            f"{r['model']:<30} {r['test_case']:<20} {r['trial_index']:<6} "
            f"{r['status']:<12} {float(r['duration']):<10.2f}".rstrip()
        )
    return "\n".join(lines) + "\n"
