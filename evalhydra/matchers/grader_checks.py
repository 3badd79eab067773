"""Checks of an OpenAI Evals eval's ``testing_criteria`` when the eval loads, before any call.

Each grader is checked as OpenAI's API would accept it: its type and required keys, its
templates, its metric, range, labels, Python source and (for ``multi``) formula. The helpers
both loading and grading read (a grader's range, a multi grader's graders, its formula, a
message's text) live here too; :mod:`evalhydra.matchers.openai_graders` grades.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.openai_templates import (
    ROLES,
    SAMPLING_PARAMS,
    TemplateError,
    check_template,
    render,
    text_parts,
)
from evalhydra.matchers.common import is_number
from evalhydra.matchers.python_grader import check_source
from evalhydra.matchers.similarity import METRICS, missing_library

__all__ = ["FUNCTIONS", "GRADER_TYPES", "READ_ONLY_KEYS", "FormulaError", "check_openai_graders", "formula",
           "formula_error", "grader_range", "message_text", "needs_judge", "sub_graders"]

#: The grader types, and the keys each must have besides ``type`` and ``name``.
GRADER_TYPES: dict[str, tuple[str, ...]] = {
    "string_check": ("input", "reference", "operation"),
    "text_similarity": ("input", "reference", "evaluation_metric"),
    "score_model": ("input", "model"),
    "label_model": ("input", "model", "labels", "passing_labels"),
    "python": ("source",),
    "multi": ("graders", "calculate_output"),
}
_OPTIONAL = {"string_check": (), "text_similarity": ("pass_threshold",),
             "score_model": ("range", "pass_threshold", "sampling_params"), "label_model": (),
             "python": ("pass_threshold", "image_tag"), "multi": ("pass_threshold",)}
_OPERATIONS = ("eq", "ne", "like", "ilike")
#: Keys the API adds to every grader it returns (read-only): accepted, never used.
READ_ONLY_KEYS = ("id", "object", "created_at", "metadata")
FUNCTIONS = {"min": min, "max": max, "abs": abs, "floor": math.floor, "ceil": math.ceil, "exp": math.exp,
              "sqrt": math.sqrt, "log": math.log}



def check_openai_graders(options: Mapping[str, Any], where: str) -> None:
    """Check every criterion (and a judge for the model graders) before any call.

    Raises:
        EvalHydraError: Naming the criterion by index and name, the key, and what it must be.
    """
    criteria = options["testing_criteria"]
    names = [str(c.get("name")) for c in criteria if isinstance(c, Mapping)]
    for index, grader in enumerate(criteria):
        _check_grader(grader, f"{where}: testing_criteria[{index}]")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise EvalHydraError(f"{where}: two testing_criteria are named '{duplicates[0]}'.",
                             "Give each criterion its own name: reports and SQL key scores by it.")
    if needs_judge(options) and not options.get("judge_service"):
        raise EvalHydraError(f"{where}: a score_model, label_model or cosine grader needs a judge_service.",
                             "Set judge_service: NAME (a service of the registry, e.g. mock).")


def needs_judge(options: Mapping[str, Any]) -> bool:
    """Whether any criterion calls a model (a score or label model, or cosine's embeddings)."""
    return any(_calls_model(g) for g in options.get("testing_criteria") or ())


def _calls_model(grader: Any) -> bool:
    if not isinstance(grader, Mapping):
        return False
    if grader.get("type") == "multi":
        graders = sub_graders(grader) if grader.get("graders") else {}
        return isinstance(graders, Mapping) and any(_calls_model(g) for g in graders.values())
    return grader.get("type") in ("score_model", "label_model") or grader.get("evaluation_metric") == "cosine"


def _check_grader(grader: Any, where: str) -> None:
    if not isinstance(grader, Mapping):
        raise EvalHydraError(f"{where}: a grader must be an object with a 'type', got {grader!r}")
    kind = grader.get("type")
    if kind not in GRADER_TYPES:
        raise EvalHydraError(f"{where}.type: {kind!r} is not a grader type evalhydra runs.",
                             f"Use one of: {', '.join(GRADER_TYPES)}.")
    name = grader.get("name")
    if not isinstance(name, str) or not name.strip():
        raise EvalHydraError(f"{where}.name: each grader needs a non-blank name.")
    where = f"{where} ('{name}')"
    for key in GRADER_TYPES[kind]:
        if key not in grader:
            raise EvalHydraError(f"{where}: a {kind} grader needs '{key}'.")
    unknown = sorted(set(grader) - {"type", "name", *GRADER_TYPES[kind], *_OPTIONAL[kind], *READ_ONLY_KEYS})
    if unknown:
        raise EvalHydraError(f"{where}.{unknown[0]}: not a field of a {kind} grader.",
                             f"Its fields: {', '.join(('name', *GRADER_TYPES[kind], *_OPTIONAL[kind]))}.")
    _CHECKS[kind](grader, where)
    threshold = grader.get("pass_threshold")
    if threshold is not None and not is_number(threshold):
        raise EvalHydraError(f"{where}.pass_threshold: must be a number, got {threshold!r}")



def _check_template(text: Any, where: str) -> None:
    if not isinstance(text, str):
        raise EvalHydraError(f"{where}: must be a string (it may hold {{{{item.x}}}} templates),"
                             f" got {text!r}")
    try:
        check_template(text)
    except TemplateError as exc:
        raise EvalHydraError(f"{where}: {exc}.", "Write {{item.FIELD}} or {{sample.output_text}}.") from None


def _check_string(grader: Mapping[str, Any], where: str) -> None:
    _check_template(grader["input"], f"{where}.input")
    _check_template(grader["reference"], f"{where}.reference")
    if grader["operation"] not in _OPERATIONS:
        raise EvalHydraError(f"{where}.operation: {grader['operation']!r} is not a string check.",
                             f"Use one of: {', '.join(_OPERATIONS)}.")


def _check_similarity(grader: Mapping[str, Any], where: str) -> None:
    _check_template(grader["input"], f"{where}.input")
    _check_template(grader["reference"], f"{where}.reference")
    metric = grader["evaluation_metric"]
    if metric not in METRICS:
        raise EvalHydraError(f"{where}.evaluation_metric: {metric!r} is not a metric.",
                             f"Use one of: {', '.join(METRICS)}.")
    problem = missing_library(metric)
    if problem:
        raise EvalHydraError(f"{where}: {problem}.")


def _check_messages(grader: Mapping[str, Any], where: str) -> None:
    messages = grader["input"]
    if not isinstance(messages, list) or not messages:
        raise EvalHydraError(f"{where}.input: must be a non-empty list of messages.")
    for index, message in enumerate(messages):
        here = f"{where}.input[{index}]"
        if not isinstance(message, Mapping) or message.get("role") not in ROLES:
            raise EvalHydraError(f"{here}: a message needs a role (user, assistant, system or developer).")
        message_text(message.get("content"), here, check=True)
    if not isinstance(grader["model"], str) or not grader["model"].strip():
        raise EvalHydraError(f"{where}.model: must name a model.")


def _check_score_model(grader: Mapping[str, Any], where: str) -> None:
    _check_messages(grader, where)
    low, high = grader_range(grader)
    if not (is_number(low) and is_number(high) and low < high):
        raise EvalHydraError(f"{where}.range: must be two numbers [low, high] with low < high, "
                             f"got {grader.get('range')!r}")
    params = grader.get("sampling_params") or {}
    known = set(SAMPLING_PARAMS)
    unknown = sorted(set(params) - known) if isinstance(params, Mapping) else ["(not an object)"]
    if unknown:
        raise EvalHydraError(f"{where}.sampling_params.{unknown[0]}: not a sampling parameter"
                             " evalhydra sends.",
                             f"Use: {', '.join(SAMPLING_PARAMS)}.")


def _check_label_model(grader: Mapping[str, Any], where: str) -> None:
    _check_messages(grader, where)
    labels, passing = grader["labels"], grader["passing_labels"]
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        raise EvalHydraError(f"{where}.labels: must be a non-empty list of strings.")
    if not isinstance(passing, list) or not set(passing) <= set(labels):
        raise EvalHydraError(f"{where}.passing_labels: must be a list of some of the labels {labels}.")


def _check_python(grader: Mapping[str, Any], where: str) -> None:
    source = grader["source"]
    problem = check_source(source) if isinstance(source, str) else "its source is not a string"
    if problem:
        raise EvalHydraError(f"{where}.source: {problem}.")


def sub_graders(grader: Mapping[str, Any]) -> Any:
    """A multi grader's graders by name: the API's object of named graders, or the single grader
    the SDK's ``MultiGrader`` type declares (named by its ``name``)."""
    graders = grader["graders"]
    if isinstance(graders, Mapping) and isinstance(graders.get("type"), str):
        return {str(graders.get("name")): graders}
    return graders


def _check_multi(grader: Mapping[str, Any], where: str) -> None:
    graders = sub_graders(grader)
    if not isinstance(graders, Mapping) or not graders:
        raise EvalHydraError(f"{where}.graders: must be an object of named graders.")
    for key, sub in graders.items():
        here = f"{where}.graders.{key}"
        if isinstance(sub, Mapping) and sub.get("type") == "multi":
            raise EvalHydraError(f"{here}: a multi grader's graders cannot be multi graders.")
        _check_grader(sub, here)
    try:
        formula(grader["calculate_output"], dict.fromkeys(graders, 0.5))
    except Exception as exc:
        raise EvalHydraError(f"{where}.calculate_output: {formula_error(exc)}",
                             f"Use the graders' names ({', '.join(graders)}), numbers, + - * / ^ and "
                             f"{', '.join(FUNCTIONS)}.") from None


_CHECKS = {"string_check": _check_string, "text_similarity": _check_similarity,
           "score_model": _check_score_model, "label_model": _check_label_model, "python": _check_python,
           "multi": _check_multi}


def formula(text: Any, scores: Mapping[str, float]) -> float:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("must be a formula")
    import simpleeval  # the graders extra, like the metrics' libraries

    value = simpleeval.simple_eval(text.replace("^", "**"), names=dict(scores), functions=FUNCTIONS)
    if not is_number(value):
        raise ValueError(f"gave {value!r}, not a number")
    return float(value)


class FormulaError(ValueError):
    """A multi grader's formula failed for one item's scores."""


def formula_error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)


def grader_range(grader: Mapping[str, Any]) -> tuple[float, float]:
    given = grader.get("range")
    if given is None:
        return 0.0, 1.0
    if isinstance(given, list | tuple) and len(given) == 2:
        return given[0], given[1]
    return math.nan, math.nan



def message_text(content: Any, where: str = "", *, check: bool = False,
                 namespaces: Mapping[str, Any] | None = None) -> str:
    """A grader message's content as text: a string, or its text parts joined (templates rendered
    with ``namespaces``; with ``check``, only checked). Image and audio parts are refused."""
    texts = text_parts(content, where)
    if check:
        for text in texts:
            _check_template(text, f"{where}.content")
    return "".join(texts if namespaces is None else (render(text, namespaces) for text in texts))


