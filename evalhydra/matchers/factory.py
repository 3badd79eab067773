"""Validate matcher specs when an eval loads, and build matchers for a run.

A spec is a mapping (a plain dict, a Hydra ``MatcherConfig`` node or dict) with
``kind`` and that kind's options. Keys whose value is None are ignored (the
typed Hydra node has every field), so only the keys actually set are checked
against :data:`MATCHER_KINDS`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.core.usercode import describe, passes_through
from evalhydra.core.values import MatchResult
from evalhydra.matchers import (
    bfcl,
    composite,
    custom,
    grader_checks,
    jsonmatch,
    model_grade,
    openai_graders,
    rubric,
    tau2,
    text,
    toolcall,
    trajectory,
)
from evalhydra.matchers.base import JudgeClient, MatchContext, Matcher, SyncMatcher
from evalhydra.matchers.common import is_number, plain
from evalhydra.matchers.options import DEFAULTS, MATCHER_KINDS, REQUIRED, check_option

__all__ = [
    "MATCHER_KINDS",
    "JUDGE_KINDS",
    "build_matcher",
    "guard",
    "judge_services_of",
    "validate_matcher",
    "with_judge_options",
    "with_judge_service",
]

#: Kinds that call a judge service.
JUDGE_KINDS = frozenset({"model_grade", "rubric", "openai_graders"})

Checker = Callable[[dict[str, Any], str, Path], None]
Builder = Callable[[dict[str, Any], Path, JudgeClient | None], Matcher]


def _as_dict(spec: Any, where: str) -> dict[str, Any]:
    raw = plain(spec)
    if not isinstance(raw, dict):
        raise EvalHydraError(f"{where}: a matcher must be a mapping with a 'kind', got {raw!r}")
    return {k: v for k, v in raw.items() if v is not None}


def _kind_of(options: dict[str, Any], where: str) -> str:
    kind = options.pop("kind", None)
    if kind is None:
        raise EvalHydraError(f"{where}: matcher has no 'kind'", did_you_mean("", MATCHER_KINDS))
    if not isinstance(kind, str) or kind not in MATCHER_KINDS:
        raise EvalHydraError(
            f"{where}: unknown matcher kind {kind!r}", did_you_mean(str(kind), MATCHER_KINDS)
        )
    return kind


def _check_keys(kind: str, options: Mapping[str, Any], where: str) -> None:
    allowed = MATCHER_KINDS[kind]
    for key in options:
        if key not in allowed:
            hint = did_you_mean(key, allowed) if allowed else f"'{kind}' takes no options."
            raise EvalHydraError(f"{where}: key '{key}' is not allowed for matcher kind '{kind}'", hint)
    for key in REQUIRED.get(kind, ()):
        if key not in options:
            raise EvalHydraError(f"{where}: matcher kind '{kind}' needs '{key}'")


def _split_weight(part: Any, kind: str, where: str) -> tuple[dict[str, Any], float | None]:
    options = _as_dict(part, where)
    weight = options.pop("weight", None)
    if weight is None:
        return options, None
    if kind != "weighted":
        raise EvalHydraError(f"{where}: 'weight' applies only to parts of a 'weighted' matcher")
    if not is_number(weight) or weight < 0:
        raise EvalHydraError(f"{where}: 'weight' must be a number >= 0, got {weight!r}")
    return options, float(weight)


def _check_parts(kind: str, options: dict[str, Any], where: str, root: Path) -> None:
    cleaned = []
    for index, part in enumerate(options["parts"]):
        part_where = f"{where}.parts[{index}]"
        spec, weight = _split_weight(part, kind, part_where)
        clean = validate_matcher(spec, part_where, registry_root=root)
        if kind == "weighted":
            clean["weight"] = 1.0 if weight is None else weight
        cleaned.append(clean)
    if kind == "weighted" and sum(p["weight"] for p in cleaned) <= 0:
        raise EvalHydraError(f"{where}: the part weights of a 'weighted' matcher sum to 0")
    options["parts"] = cleaned


def _no_check(options: dict[str, Any], where: str, root: Path) -> None:
    del options, where, root


def _check_schema(options: dict[str, Any], where: str, root: Path) -> None:
    jsonmatch.make_validator(jsonmatch.load_schema(options["schema"], root, where), where)


def _check_counts(options: dict[str, Any], where: str) -> None:
    """``min`` and ``max`` of ``tool_used`` and ``step_count``: whole numbers >= 0, min <= max."""
    for key in ("min", "max"):
        value = options.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise EvalHydraError(f"{where}: '{key}' must be a whole number >= 0, got {value!r}")
    low, high = options.get("min"), options.get("max")
    if low is not None and high is not None and low > high:
        raise EvalHydraError(f"{where}: min {low} is more than max {high}: no count can pass",
                             "Set min <= max (max: 0 alone means the tool is never called).")


def _check_tool_used(options: dict[str, Any], where: str) -> None:
    if (options.get("name") is None) == (options.get("pattern") is None):
        raise EvalHydraError(f"{where}: tool_used needs exactly one of 'name' or 'pattern'")
    _check_counts(options, where)


_CHECKERS: dict[str, Checker] = {
    "tool_used": lambda options, where, root: _check_tool_used(options, where),
    "step_count": lambda options, where, root: _check_counts(options, where),
    "regex": lambda options, where, root: text.check_regex(options, where),
    "json_schema": _check_schema,
    "rubric": lambda options, where, root: rubric.check_rubric(options, root, where),
    "custom": lambda options, where, root: custom.check_custom(options, root, where),
    "openai_graders": lambda options, where, root: grader_checks.check_openai_graders(options, where),
}


def validate_matcher(spec: Mapping[str, Any], where: str, *, registry_root: Path) -> dict[str, Any]:
    """Check a matcher spec when the eval loads and return it cleaned.

    Args:
        spec: The spec (dict, Hydra node or ``MatcherConfig``).
        where: Where the spec comes from, e.g.
            ``registry/evals/smoke/reply_ok.json: matcher``.
        registry_root: The root registry-relative paths resolve against.

    Returns:
        A plain dict: ``kind``, the options set, defaults filled, Nones dropped,
        composite parts cleaned recursively (weighted parts carry ``weight``).

    Raises:
        EvalHydraError: Unknown kind or key, a wrong type or range, a missing or
            unsafe file, a contaminated rubric prompt, a bad regex or schema,
            an unimportable custom target.
    """
    options = _as_dict(spec, where)
    kind = _kind_of(options, where)
    _check_keys(kind, options, where)
    options = {key: check_option(key, value, where) for key, value in options.items()}
    options = {**DEFAULTS.get(kind, {}), **options}
    if kind in composite.COMPOSITE_KINDS:
        _check_parts(kind, options, where, registry_root)
    else:
        _CHECKERS.get(kind, _no_check)(options, where, registry_root)
    return {"kind": kind, **options}


def guard(matcher: Matcher, kind: str) -> Matcher:
    """Wrap a matcher so that whatever it raises on an output is that output's FAIL.

    The run goes on: the result fails with score 0 and the reason ``the matcher raised
    <ExceptionType>: <message>`` (``details["matcher_error"]`` keeps it too). It is scored, never
    an infrastructure error: an output that makes its matcher raise (a 400-digit number, text a
    parser chokes on) must count against the pass rate, not drop out of it. Anything user code
    may raise (a ``SystemExit`` too) is contained; a Ctrl-C and trio's cancellation propagate.
    """

    sync = matcher.fn if isinstance(matcher, SyncMatcher) else None

    async def guarded(ctx: MatchContext) -> MatchResult:
        try:
            return sync(ctx) if sync is not None else await matcher(ctx)
        except BaseException as exc:
            if passes_through(exc):
                raise
            said = describe(exc)
            return MatchResult(passed=False, score=0.0, reason=f"the matcher raised {said}",
                               details={"kind": kind, "matcher_error": said})

    guarded.__name__ = f"{kind}_matcher"
    return guarded


_BUILDERS: dict[str, Builder] = {
    "exact_match": lambda spec, root, judges: text.build_exact_match(spec),
    "includes": lambda spec, root, judges: text.build_includes(spec),
    "regex": lambda spec, root, judges: text.build_regex(spec),
    "json_fields": lambda spec, root, judges: jsonmatch.build_json_fields(spec),
    "json_schema": lambda spec, root, judges: jsonmatch.build_json_schema(spec, root),
    "tool_call": lambda spec, root, judges: toolcall.build_tool_call(spec),
    "bfcl_ast": lambda spec, root, judges: bfcl.build_bfcl_ast(spec),
    "model_grade": lambda spec, root, judges: model_grade.build_model_grade(spec, judges),
    "rubric": lambda spec, root, judges: rubric.build_rubric(spec, root, judges),
    "custom": lambda spec, root, judges: custom.build_custom(spec, root),
    "openai_graders": lambda spec, root, judges: openai_graders.build_openai_graders(spec, judges),
    "tau2": lambda spec, root, judges: tau2.build_tau2(spec, root, judges),
    **dict.fromkeys(trajectory.PATH_KINDS, lambda spec, root, judges: trajectory.build_path_matcher(spec)),
}


def _build(clean: dict[str, Any], root: Path, judges: JudgeClient | None) -> Matcher:
    kind = clean["kind"]
    if kind in composite.COMPOSITE_KINDS:
        parts = [
            composite.Part(p["kind"], _build(p, root, judges), p.get("weight", 1.0)) for p in clean["parts"]
        ]
        return guard(composite.build_composite(kind, parts, clean.get("threshold")), kind)
    return guard(_BUILDERS[kind](clean, root, judges), kind)


def build_matcher(
    spec: Mapping[str, Any],
    *,
    registry_root: Path,
    judges: JudgeClient | None,
    where: str = "matcher",
) -> Matcher:
    """Build the matcher a spec describes (validating it first).

    Every matcher, composite parts included, is wrapped by :func:`guard`.

    Args:
        spec: A matcher spec, raw or already cleaned by :func:`validate_matcher`.
        registry_root: The root registry-relative paths resolve against.
        judges: The judge client; needed only for ``model_grade``/``rubric``.
        where: Where the spec comes from, for error messages.

    Raises:
        EvalHydraError: The spec is invalid, or names a judge service ``judges``
            does not know.
        ValueError: A judge matcher was built without a judge client.
    """
    clean = validate_matcher(spec, where, registry_root=registry_root)
    return _build(clean, registry_root, judges)


def _parts_of(spec: Mapping[str, Any]) -> list[Any]:
    parts = spec.get("parts")
    return list(parts) if isinstance(parts, list | tuple) else []


def judge_services_of(spec: Mapping[str, Any]) -> set[str]:
    """Every ``judge_service`` a spec names, composite parts included."""
    options = plain(spec)
    if not isinstance(options, dict):
        return set()
    found = set()
    service = options.get("judge_service")
    if isinstance(service, str) and service.strip():
        found.add(service.strip())
    for part in _parts_of(options):
        found |= judge_services_of(part)
    return found


def judge_settings(spec: Mapping[str, Any]) -> str | None:
    """A short fingerprint of a matcher that calls a judge (its rubric, prompt, passing score and
    every other option, composite parts included), or None when it calls none: verdicts given
    under other settings are another judge's (:mod:`evalhydra.analysis.judges`)."""
    if not judge_services_of(spec):
        return None
    text = json.dumps(plain(spec), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def with_judge_service(spec: Mapping[str, Any], service: str) -> dict[str, Any]:
    """Return a plain copy of ``spec`` whose judge matchers all use ``service``.

    This is the ``judge_service=`` / ``--judge-service`` override: it replaces
    the judge of every ``model_grade`` and ``rubric`` matcher, parts included.
    """
    return with_judge_options(spec, judge_service=service)


def with_judge_options(spec: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """Return a plain copy of ``spec`` with ``options`` set on every ``model_grade`` and
    ``rubric`` matcher, parts included (``judge_service=``, ``judge.include_reasoning=``)."""
    copy = plain(spec)
    if copy.get("kind") in JUDGE_KINDS:
        copy.update(options)
    if _parts_of(copy):
        copy["parts"] = [with_judge_options(p, **options) for p in _parts_of(copy)]
    return dict(copy)
