"""Composite matchers: ``all_of``, ``any_of`` and ``weighted``.

``parts`` is a list of matcher specs, run concurrently on the same output.

- ``all_of`` passes when every part passes; score = the lowest part score;
  reason = ``part N (kind): <reason>`` of every failing part, joined by ``; ``.
- ``any_of`` passes when some part passes; score = the highest part score;
  reason = ``no part passed: part 1 (kind): …; part 2 (kind): …``.
- ``weighted`` scores Σ weight·score / Σ weight (``weight`` on a part, default
  1) and passes when that is ≥ ``threshold`` (default 0.5: a weighted majority;
  set 1.0 to demand every part); reason = the score against the threshold,
  then every failing part.

Each part's ``kind``, ``passed``, ``score``, ``reason`` (and ``error_kind``,
``weight``) are kept in ``details["parts"]``. The result carries an
``error_kind`` only when errored parts could change the verdict. Judge calls
of several parts are merged into one ``judge`` record; the first part with
rubric feedback lends its feedback fields.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from evalhydra.core.values import ErrorKind, MatchResult
from evalhydra.matchers.base import MatchContext, Matcher
from evalhydra.matchers.judging import merge_judges

__all__ = [
    "COMPOSITE_KINDS",
    "DEFAULT_WEIGHTED_THRESHOLD",
    "Part",
    "build_composite",
    "combine",
    "matcher_parts",
    "run_parts",
]

COMPOSITE_KINDS = ("all_of", "any_of", "weighted")
DEFAULT_WEIGHTED_THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class Part:
    """One built part of a composite matcher."""

    kind: str
    matcher: Matcher
    weight: float = 1.0


async def run_parts(parts: Sequence[Part], ctx: MatchContext) -> list[MatchResult]:
    """Run every part concurrently and return their results in part order."""
    results: list[MatchResult | None] = [None] * len(parts)

    async def run_one(index: int) -> None:
        results[index] = await parts[index].matcher(ctx)

    async with trio.open_nursery() as nursery:
        for index in range(len(parts)):
            nursery.start_soon(run_one, index)
    return [r for r in results if r is not None]


def _label(index: int, part: Part, result: MatchResult) -> str:
    return f"part {index + 1} ({part.kind}): {result.reason or 'failed'}"


def _failing(parts: Sequence[Part], results: Sequence[MatchResult]) -> str:
    """Every failing part, in order: ``part N (kind): reason; …``."""
    return "; ".join(_label(i, p, r) for i, (p, r) in enumerate(zip(parts, results, strict=True))
                     if not r.passed)


def _all_of(parts: Sequence[Part], results: Sequence[MatchResult]) -> tuple[bool, float, str]:
    score = min(r.score for r in results)
    if all(r.passed for r in results):
        return True, score, ""
    return False, score, _failing(parts, results)


def _any_of(parts: Sequence[Part], results: Sequence[MatchResult]) -> tuple[bool, float, str]:
    score = max(r.score for r in results)
    if any(r.passed for r in results):
        return True, score, ""
    labels = [_label(i, p, r) for i, (p, r) in enumerate(zip(parts, results, strict=True))]
    return False, score, "no part passed: " + "; ".join(labels)


def _weighted(
    parts: Sequence[Part], results: Sequence[MatchResult], threshold: float
) -> tuple[bool, float, str]:
    total = sum(p.weight for p in parts)
    score = sum(p.weight * r.score for p, r in zip(parts, results, strict=True)) / total
    score = min(1.0, max(0.0, round(score, 10)))
    if score >= threshold:
        return True, score, ""
    failing = _failing(parts, results)
    return False, score, f"weighted score {score:.3f} below threshold {threshold:.3f}" + (
        f": {failing}" if failing else "")


Verdict = Callable[[Sequence[Part], Sequence[MatchResult]], tuple[bool, float, str]]


def _verdict_fn(kind: str, threshold: float) -> Verdict:
    if kind == "all_of":
        return _all_of
    if kind == "any_of":
        return _any_of
    return lambda parts, results: _weighted(parts, results, threshold)


def _error_kind(verdict: Verdict, parts: Sequence[Part], results: Sequence[MatchResult]) -> ErrorKind | None:
    errored = [r for r in results if r.error_kind is not None]
    if not errored:
        return None
    as_pass = [MatchResult(True, 1.0) if r.error_kind else r for r in results]
    as_fail = [MatchResult(False, 0.0) if r.error_kind else r for r in results]
    if verdict(parts, as_pass)[0] == verdict(parts, as_fail)[0]:
        return None
    return errored[0].error_kind


def _part_details(part: Part, result: MatchResult, weighted: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": part.kind,
        "passed": result.passed,
        "score": result.score,
        "reason": result.reason,
    }
    if result.error_kind is not None:
        row["error_kind"] = str(result.error_kind)
    if weighted:
        row["weight"] = part.weight
    return row


def _feedback_source(results: Sequence[MatchResult]) -> MatchResult | None:
    with_feedback = [r for r in results if r.feedback is not None]
    return next((r for r in with_feedback if r.feedback), with_feedback[0] if with_feedback else None)


def combine(
    kind: str, parts: Sequence[Part], results: Sequence[MatchResult], threshold: float
) -> MatchResult:
    """Combine part results into the composite's result (pure).

    Args:
        kind: ``all_of``, ``any_of`` or ``weighted``.
        parts: The parts, in order.
        results: Their results, in the same order.
        threshold: The ``weighted`` pass threshold (ignored otherwise).
    """
    verdict = _verdict_fn(kind, threshold)
    ok, score, reason = verdict(parts, results)
    rows = [_part_details(p, r, kind == "weighted") for p, r in zip(parts, results, strict=True)]
    source = _feedback_source(results)
    return MatchResult(
        passed=ok,
        score=score,
        reason=None if ok else reason,
        details={"parts": rows},
        feedback=source.feedback if source else None,
        rubric_scores=source.rubric_scores if source else None,
        failure_category=source.failure_category if source and not ok else None,
        suggested_fix=source.suggested_fix if source and not ok else None,
        judge=merge_judges([r.judge for r in results if r.judge is not None]),
        error_kind=_error_kind(verdict, parts, results),
    )


def matcher_parts(details: Any) -> list[dict[str, Any]]:
    """A stored result's composite parts (its ``details["parts"]``), each as ``kind``, ``passed``,
    ``score``, ``reason`` and ``weight`` (None unless weighted); [] for any other matcher, and for
    entries of other shapes (a stored row is outside input)."""
    parts = details.get("parts") if isinstance(details, dict) else None
    if not isinstance(parts, list):
        return []
    return [{"kind": str(p.get("kind")), "passed": bool(p.get("passed")),
             "score": p.get("score") if isinstance(p.get("score"), int | float) else None,
             "reason": str(p.get("reason") or p.get("error_kind") or ""),
             "weight": p.get("weight") if isinstance(p.get("weight"), int | float) else None}
            for p in parts if isinstance(p, dict)]


def build_composite(kind: str, parts: Sequence[Part], threshold: float | None = None) -> Matcher:
    """Build an ``all_of``/``any_of``/``weighted`` matcher from built parts."""
    limit = DEFAULT_WEIGHTED_THRESHOLD if threshold is None else threshold
    frozen = tuple(parts)

    async def match(ctx: MatchContext) -> MatchResult:
        return combine(kind, frozen, await run_parts(frozen, ctx), limit)

    return match
