"""``evalhydra power``'s text: the cases needed per trial count
(:mod:`evalhydra.analysis.samplesize` computes them) as a table, or JSON."""

from __future__ import annotations

import json
from typing import Any

from tabulate import tabulate

__all__ = ["render_power"]


def _counts(row: dict[str, Any]) -> list[str]:
    """A row's cases and results per side as printed."""
    if row["beyond"] is not None:
        return [f"more than {row['beyond']:,}", f"more than {row['beyond'] * row['trials']:,}"]
    return [f"{row['cases']:,}", f"{row['results_per_side']:,}"]


def render_power(doc: dict[str, Any], fmt: str = "text") -> str:
    """The report as ``text`` or ``json``."""
    if fmt == "json":
        return json.dumps(doc, indent=2)
    table = tabulate([[r["trials"], f"{r['case_sd']:.3f}", *_counts(r)] for r in doc["rows"]],
                     headers=["trials/case", "SD of a case's Δ", "cases needed", "results per side"],
                     tablefmt="simple", disable_numparse=True)
    lines = [f"to detect a drop of {doc['drop'] * 100:g} points at {doc['power']:.0%} power"
             " (the gate's one-sided 5% test, case-clustered):", f"variance from: {doc['source']}", "", table]
    if not doc["separable"]:
        lines.append("one trial per case: within- and between-case variance cannot be told apart, so"
                     " more trials are assumed not to help (store a run with trials > 1 to see how they do)")
    now = doc["now"]
    if now and now["min_detectable"] is None:
        lines.append(f"now: {now['cases']} cases cannot reach p < 0.05 whatever the drop"
                     f" (at least {now['cases_needed']} are needed)")
    elif now:
        lines.append(f"now: {now['cases']} cases × {now['trials']} trial(s) detect drops of"
                     f" {now['min_detectable'] * 100:.1f} points or more")
    return "\n".join(lines)

