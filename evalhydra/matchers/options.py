"""Which options each matcher kind takes, their types, defaults and required keys.

Every check here is about one value; the cross-file checks (prompt files,
schemas, imports) live with each matcher.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.matchers.common import ASCII_WHITESPACE, is_number, is_unit_number

__all__ = ["DEFAULTS", "MATCHER_KINDS", "REQUIRED", "check_option"]

_TEXT = ("case_sensitive", "trim_whitespace", "ideal")
_JUDGE = ("judge_service", "judge_model", "include_reasoning")

#: kind -> the option keys it accepts besides ``kind``.
MATCHER_KINDS: dict[str, set[str]] = {
    "exact_match": set(_TEXT),
    "includes": set(_TEXT),
    "regex": {"pattern", "flags", "ideal"},
    "json_fields": {"required_fields"},
    "json_schema": {"schema", "strip_fence"},
    "tool_call": {"strict_arguments"},
    "bfcl_ast": set(),
    "model_grade": {*_JUDGE, "rubric", "pass_score", "include_transcript"},
    "rubric": {*_JUDGE, "prompt", "weights", "pass_threshold", "include_transcript"},
    "all_of": {"parts"},
    "any_of": {"parts"},
    "weighted": {"parts", "threshold"},
    "custom": {"_target_", "validator", "kwargs", "pass_score"},
    "openai_graders": {*_JUDGE, "testing_criteria", "embedding_model", "python_timeout_s", "output_json"},
    # a tool-using answer's path and end state (evalhydra.matchers.trajectory)
    "tool_used": {"name", "pattern", "min", "max"},
    "tool_args": {"name", "args", "mode", "ignore"},
    "tool_sequence": {"steps", "mode"},
    "step_count": {"min", "max"},
    "tool_call_f1": {"steps", "pass_threshold"},
    "tool_args_valid": set(),
    "no_tool_errors": set(),
    "state": {"state", "mode"},
    # τ²-bench's reward (evalhydra.matchers.tau2)
    "tau2": {"tool_class", "user_tool_class", "judge_service", "judge_model"},
}

#: Defaults filled into the cleaned spec.
DEFAULTS: dict[str, dict[str, Any]] = {
    "exact_match": {"case_sensitive": True, "trim_whitespace": True},
    "includes": {"case_sensitive": True, "trim_whitespace": True},
    "json_schema": {"strip_fence": True},
    "model_grade": {"pass_score": 1.0},
    "rubric": {"pass_threshold": 0.85},
    "weighted": {"threshold": 0.5},
}

#: Keys a kind cannot do without.
REQUIRED: dict[str, tuple[str, ...]] = {
    "regex": ("pattern",),
    "json_fields": ("required_fields",),
    "json_schema": ("schema",),
    "model_grade": ("judge_service", "rubric"),
    "rubric": ("judge_service", "prompt"),
    "all_of": ("parts",),
    "any_of": ("parts",),
    "weighted": ("parts",),
    "openai_graders": ("testing_criteria",),
    "tool_args": ("name",),
    "tool_sequence": ("steps",),
    "tool_call_f1": ("steps",),
    "state": ("state",),
    "tau2": ("tool_class",),
}


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip(ASCII_WHITESPACE))


def _is_field_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_text(v) for v in value)


def _is_name_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_weights(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(isinstance(k, str) and is_number(v) and v >= 0 for k, v in value.items())
    )


def _is_parts(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _is_schema(value: Any) -> bool:
    return isinstance(value, Mapping | bool) or _is_text(value)


_BOOL = (lambda v: isinstance(v, bool), "true or false")
_NONBLANK = (_is_text, "a non-blank string")
_UNIT = (is_unit_number, "a number between 0 and 1")

_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "case_sensitive": _BOOL,
    "trim_whitespace": _BOOL,
    "strip_fence": _BOOL,
    "ideal": (lambda v: isinstance(v, str), "a string"),
    "required_fields": (_is_field_list, "a non-empty list of non-blank strings"),
    "pattern": _NONBLANK,
    "flags": (_is_name_list, "a list of flag names such as IGNORECASE or i"),
    "schema": (_is_schema, "a JSON schema object or a registry-relative file path"),
    "judge_service": _NONBLANK,
    "judge_model": _NONBLANK,
    "include_reasoning": (lambda v: isinstance(v, bool), "true or false"),
    "rubric": _NONBLANK,
    "prompt": _NONBLANK,
    "pass_score": _UNIT,
    "pass_threshold": _UNIT,
    "threshold": _UNIT,
    "weights": (_is_weights, "a non-empty mapping of criterion to a weight >= 0"),
    "parts": (_is_parts, "a non-empty list of matcher specs"),
    "_target_": _NONBLANK,
    "validator": _NONBLANK,
    "kwargs": (lambda v: isinstance(v, Mapping), "a mapping of keyword arguments"),
    "testing_criteria": (_is_parts, "a non-empty list of OpenAI grader objects"),
    "embedding_model": _NONBLANK,
    "python_timeout_s": (lambda v: is_number(v) and v > 0, "a number of seconds > 0"),
    "output_json": _BOOL,
    "include_transcript": _BOOL,
    "name": _NONBLANK,
    "min": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number >= 0"),
    "max": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number >= 0"),
    "args": (lambda v: isinstance(v, Mapping), "an object of argument values"),
    "mode": (lambda v: v in ("partial", "exact", "in_order", "subset", "superset"),
             "partial or exact (tool_args, state); in_order, exact, subset or superset (tool_sequence)"),
    "ignore": (_is_name_list, "a list of argument names"),
    "steps": (lambda v: _is_name_list(v) and bool(v), "a non-empty list of tool names"),
    "state": (lambda v: v is not None, "the expected end state (an object, or any JSON value)"),
    "tool_class": (lambda v: isinstance(v, str) and ":" in v, "a class, module:Class"),
    "user_tool_class": (lambda v: isinstance(v, str) and ":" in v, "a class, module:Class"),
    "strict_arguments": _BOOL,
}

#: String options stored trimmed (zig_eval trims required strings).
_TRIMMED = {"judge_service", "judge_model", "rubric", "prompt", "_target_", "validator", "embedding_model"}


def check_option(key: str, value: Any, where: str) -> Any:
    """Check one option's type and range; return it normalised.

    Raises:
        EvalHydraError: Naming the key, what it must be, and the value given.
    """
    check, expected = _CHECKS[key]
    if not check(value):
        raise EvalHydraError(f"{where}: '{key}' must be {expected}, got {value!r}")
    if key in _TRIMMED:
        return value.strip(ASCII_WHITESPACE)
    if key == "required_fields":
        return [v.strip(ASCII_WHITESPACE) for v in value]
    if key in ("pass_score", "pass_threshold", "threshold"):
        return float(value)
    if key == "weights":
        return {k: float(v) for k, v in value.items()}
    return value
