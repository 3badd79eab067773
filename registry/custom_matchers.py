"""Example custom matchers for the packaged registry (``matchers.custom_target``).

A ``custom`` matcher names a callable by its dotted path in ``_target_``; this
module ships inside the package as ``evalhydra.registry_data.custom_matchers``.
Your own matchers live in any importable module of yours.
"""

from __future__ import annotations

from typing import Any

from evalhydra.matchers import MatchContext


def keyword_coverage(ctx: MatchContext, separator: str = ",") -> dict[str, Any]:
    """Score the share of the ideal's keywords that the output (or a tool call) mentions.

    The case's ``ideal`` lists the keywords (``"red,green,blue"``); matching is
    case-insensitive and also looks at tool-call arguments, so a model that
    answers through a tool still gets credit.
    """
    keywords = [k.strip() for k in (ctx.case.ideal or "").split(separator) if k.strip()]
    if not keywords:
        return {"passed": False, "score": 0.0, "reason": "no keywords in the ideal"}
    haystack = " ".join([ctx.output, *(call.arguments for call in ctx.tool_calls)]).lower()
    found = [k for k in keywords if k.lower() in haystack]
    missing = [k for k in keywords if k not in found]
    return {
        "score": round(len(found) / len(keywords), 4),
        "reason": f"missing keywords: {', '.join(missing)}" if missing else None,
        "details": {"found": found, "missing": missing},
    }
