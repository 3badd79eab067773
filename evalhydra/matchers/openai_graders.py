"""The ``openai_graders`` matcher: an OpenAI Evals eval's ``testing_criteria``, graded as OpenAI does.

Each criterion is one of OpenAI's graders, read as the API returns it:

- ``string_check``: ``eq``, ``ne`` (case-sensitive), ``like`` (contains), ``ilike``
  (contains, any case) of ``input`` against ``reference``; score 1 or 0.
- ``text_similarity``: ``evaluation_metric`` of ``input`` against ``reference``
  (:mod:`evalhydra.matchers.similarity`); passes at ``pass_threshold``.
- ``score_model``: a judge model is sent the grader's ``input`` messages and asked for
  ``{"result": number, "steps": […]}`` (a bare number is read too); the score must lie in
  ``range`` (default [0, 1]) and passes at ``pass_threshold``.
- ``label_model``: a judge picks one of ``labels`` (``{"result": label}``, or the bare
  label); passes when it is in ``passing_labels``; score 1 or 0.
- ``python``: ``grade(sample, item)`` of ``source`` in a subprocess
  (:mod:`evalhydra.matchers.python_grader`); passes at ``pass_threshold``.
- ``multi``: ``calculate_output``, a formula over its named ``graders``' scores
  (``+ - * / ^``, ``min max abs floor ceil exp sqrt log``); passes at ``pass_threshold``.

Templates (``{{item.x}}``, ``{{sample.output_text}}``) render from the case's ``item``
and the candidate's reply (:mod:`evalhydra.core.openai_templates`). Without a
``pass_threshold``, a score passes at the middle of its range (0.5 for [0, 1]).

Every criterion's score and verdict is stored (``results.grader_scores``); the cell
passes when every criterion passes, and its score is the mean of the criteria's
scores, each scaled to [0, 1] by its range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.openai_templates import (
    ROLES,
    SAMPLING_PARAMS,
    TemplateError,
    check_template,
    render,
    text_parts,
)
from evalhydra.core.values import NO_CELL, CallContext, ChatRequest, Completion, MatchResult
from evalhydra.matchers.base import JudgeClient, MatchContext, Matcher
from evalhydra.matchers.judging import invalid_judge_output, judge_call_failed, merge_judges, require_judge
from evalhydra.matchers.python_grader import (
    DEFAULT_TIMEOUT_S,
    PythonGraderError,
    check_source,
    run_python_grader,
)
from evalhydra.matchers.similarity import METRICS, cosine, missing_library, similarity

__all__ = ["GRADER_TYPES", "build_openai_graders", "check_openai_graders", "needs_judge", "sample_namespace"]

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
#: cosine's embedding model unless the matcher names one (OpenAI's graders guide uses it).
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-large"
_FUNCTIONS = {"min": min, "max": max, "abs": abs, "floor": math.floor, "ceil": math.ceil, "exp": math.exp,
              "sqrt": math.sqrt, "log": math.log}
#: What a score model is asked to return (OpenAI's score-model output).
_SCORE_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["steps", "result"],
                 "properties": {
    "steps": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                         "required": ["description", "conclusion"],
                                         "properties": {"description": {"type": "string"},
                                                        "conclusion": {"type": "string"}}}},
    "result": {"type": "number"}}}
# -- checked when the eval loads ----------------------------------------------------------------


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
        graders = _sub_graders(grader) if grader.get("graders") else {}
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
    if threshold is not None and not _is_number(threshold):
        raise EvalHydraError(f"{where}.pass_threshold: must be a number, got {threshold!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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
    low, high = _range(grader)
    if not (_is_number(low) and _is_number(high) and low < high):
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


def _sub_graders(grader: Mapping[str, Any]) -> Any:
    """A multi grader's graders by name: the API's object of named graders, or the single grader
    the SDK's ``MultiGrader`` type declares (named by its ``name``)."""
    graders = grader["graders"]
    if isinstance(graders, Mapping) and isinstance(graders.get("type"), str):
        return {str(graders.get("name")): graders}
    return graders


def _check_multi(grader: Mapping[str, Any], where: str) -> None:
    graders = _sub_graders(grader)
    if not isinstance(graders, Mapping) or not graders:
        raise EvalHydraError(f"{where}.graders: must be an object of named graders.")
    for key, sub in graders.items():
        here = f"{where}.graders.{key}"
        if isinstance(sub, Mapping) and sub.get("type") == "multi":
            raise EvalHydraError(f"{here}: a multi grader's graders cannot be multi graders.")
        _check_grader(sub, here)
    try:
        _formula(grader["calculate_output"], dict.fromkeys(graders, 0.5))
    except Exception as exc:
        raise EvalHydraError(f"{where}.calculate_output: {_formula_error(exc)}",
                             f"Use the graders' names ({', '.join(graders)}), numbers, + - * / ^ and "
                             f"{', '.join(_FUNCTIONS)}.") from None


_CHECKS = {"string_check": _check_string, "text_similarity": _check_similarity,
           "score_model": _check_score_model, "label_model": _check_label_model, "python": _check_python,
           "multi": _check_multi}


def _formula(text: Any, scores: Mapping[str, float]) -> float:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("must be a formula")
    import simpleeval  # the graders extra, like the metrics' libraries

    value = simpleeval.simple_eval(text.replace("^", "**"), names=dict(scores), functions=_FUNCTIONS)
    if not _is_number(value):
        raise ValueError(f"gave {value!r}, not a number")
    return float(value)


class _FormulaError(ValueError):
    """A multi grader's formula failed for one item's scores."""


def _formula_error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)


def _range(grader: Mapping[str, Any]) -> tuple[float, float]:
    given = grader.get("range")
    if given is None:
        return 0.0, 1.0
    if isinstance(given, list | tuple) and len(given) == 2:
        return given[0], given[1]
    return math.nan, math.nan


# -- the sample namespace -------------------------------------------------------------------------


def sample_namespace(ctx: MatchContext, *, with_json: bool = False) -> dict[str, Any]:
    """``sample`` as OpenAI's templates see it: ``output_text``, ``output_json`` (the reply parsed,
    as OpenAI fills it only for a run that asked for structured output: ``with_json``; else
    None), ``output_tools`` and ``choices`` (chat-completions shapes)."""
    tools = [{"id": f"call_{i}", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
             for i, c in enumerate(ctx.tool_calls)]
    message: dict[str, Any] = {"role": "assistant", "content": ctx.output}
    if tools:
        message["tool_calls"] = tools
    parsed = strictjson.stored(ctx.output, None) if with_json else None
    return {"output_text": ctx.output, "output_json": parsed,
            "output_tools": tools,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tools else "stop"}]}


def message_text(content: Any, where: str = "", *, check: bool = False,
                 namespaces: Mapping[str, Any] | None = None) -> str:
    """A grader message's content as text: a string, or its text parts joined (templates rendered
    with ``namespaces``; with ``check``, only checked). Image and audio parts are refused."""
    texts = text_parts(content, where)
    if check:
        for text in texts:
            _check_template(text, f"{where}.content")
    return "".join(texts if namespaces is None else (render(text, namespaces) for text in texts))


# -- grading ------------------------------------------------------------------------------------


@dataclass
class _Outcome:
    """One criterion's verdict; ``failure`` is set when it could not be graded (a judge failed)."""

    score: float
    passed: bool
    low: float = 0.0
    high: float = 1.0
    reason: str | None = None
    calls: list[Completion] = field(default_factory=list)
    failure: MatchResult | None = None
    error: str | None = None  # the grader could not run for this item (its result is errored)
    answer: str | None = None  # a model grader's raw answer (its steps included)
    kind: str | None = None  # the grader's type


class _Grading:
    """Grades criteria for one case: templates, judges, embeddings and subprocesses."""

    def __init__(self, options: Mapping[str, Any], judges: JudgeClient | None) -> None:
        self.service = options.get("judge_service")
        self.judge_model = options.get("judge_model")
        self.embedding_model = options.get("embedding_model", DEFAULT_EMBEDDING_MODEL)
        self.output_json = bool(options.get("output_json", False))
        self.timeout_s = float(options.get("python_timeout_s", DEFAULT_TIMEOUT_S))
        self.judges = judges

    async def grade(self, grader: Mapping[str, Any], ns: Mapping[str, Any],
                    call: CallContext = NO_CELL) -> _Outcome:
        kind = grader["type"]
        if kind == "string_check":
            return _string_check(grader, ns)
        if kind == "text_similarity":
            return await self._similarity(grader, ns)
        if kind == "score_model":
            return await self._score_model(grader, ns, call)
        if kind == "label_model":
            return await self._label_model(grader, ns, call)
        if kind == "python":
            return await self._python(grader, ns)
        return await self._multi(grader, ns, call)

    async def _similarity(self, grader: Mapping[str, Any], ns: Mapping[str, Any]) -> _Outcome:
        text, reference = render(grader["input"], ns), render(grader["reference"], ns)
        metric, calls = grader["evaluation_metric"], []
        if metric == "cosine":
            vectors, completion = await self._judges().embed(str(self.service), self.embedding_model,
                                                             [text, reference])
            if vectors is None:
                return _Outcome(0.0, False, failure=judge_call_failed(completion))
            score, calls = cosine(vectors[0], vectors[1]), [completion]
        else:  # on a worker thread: the event loop keeps serving the run's other cells
            score = await trio.to_thread.run_sync(similarity, metric, text, reference)
        return _threshold(grader, score, calls)

    def _request(self, grader: Mapping[str, Any], ns: Mapping[str, Any],
                 response_format: dict[str, Any]) -> ChatRequest:
        messages = tuple({"role": ROLES[m["role"]], "content": message_text(m["content"], namespaces=ns)}
                         for m in grader["input"])
        sampling = grader.get("sampling_params") or {}
        params = {SAMPLING_PARAMS[k]: v for k, v in sampling.items() if v is not None}
        params["response_format"] = response_format
        last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        return ChatRequest(user_content=last, model=self.judge_model or grader["model"], params=params,
                           messages=messages, system_prompt="")

    def _judges(self) -> JudgeClient:
        return require_judge(self.judges, str(self.service), "openai_graders")

    async def _score_model(self, grader: Mapping[str, Any], ns: Mapping[str, Any],
                           call: CallContext) -> _Outcome:
        low, high = _range(grader)
        schema = {"type": "json_schema",
                  "json_schema": {"name": "score", "strict": True, "schema": _SCORE_SCHEMA}}
        completion = await self._judges().judge(str(self.service), self._request(grader, ns, schema), call)
        if completion.error_kind is not None:
            return _Outcome(0.0, False, failure=judge_call_failed(completion))
        given = _reply_number(completion.output)
        # as OpenAI grades: an answer that is no number counts 0, one outside the range is cut to it
        score = min(high, max(low, given if given is not None else 0.0))
        outcome = _threshold(grader, score, [completion], low, high)
        outcome.answer = completion.output[:_ANSWER_CHARS]
        if given is None:
            outcome.reason = f"the score model answered no number ({completion.output[:80]!r}): 0"
        return outcome

    async def _label_model(self, grader: Mapping[str, Any], ns: Mapping[str, Any],
                           call: CallContext) -> _Outcome:
        labels = list(grader["labels"])
        schema = {"type": "json_schema", "json_schema": {"name": "label", "strict": True, "schema": {
            "type": "object", "additionalProperties": False, "required": ["result"],
            "properties": {"result": {"type": "string", "enum": labels}}}}}
        completion = await self._judges().judge(str(self.service), self._request(grader, ns, schema), call)
        if completion.error_kind is not None:
            return _Outcome(0.0, False, failure=judge_call_failed(completion))
        label = _reply_label(completion.output, labels)
        if label is None:
            return _Outcome(0.0, False, failure=invalid_judge_output(
                completion, f"InvalidLabelModelOutput: '{grader['name']}' wants one of {labels}"
                            f", got {completion.output[:200]!r}"))
        passed = label in grader["passing_labels"]
        return _Outcome(1.0 if passed else 0.0, passed, reason=None if passed else f"label '{label}'",
                        calls=[completion])

    async def _python(self, grader: Mapping[str, Any], ns: Mapping[str, Any]) -> _Outcome:
        try:
            score = await run_python_grader(grader["source"], dict(ns["sample"]), ns["item"], self.timeout_s)
        except PythonGraderError as exc:
            return _Outcome(0.0, False, reason=f"python grader: {exc}")
        return _threshold(grader, score, [])

    async def _multi(self, grader: Mapping[str, Any], ns: Mapping[str, Any], call: CallContext) -> _Outcome:
        scores: dict[str, float] = {}
        calls: list[Completion] = []
        for key, sub in _sub_graders(grader).items():
            outcome = await self.grade(sub, ns, call)
            if outcome.failure is not None or outcome.error is not None:
                return outcome
            scores[key], calls = outcome.score, [*calls, *outcome.calls]
        try:
            value = _formula(grader["calculate_output"], scores)
        except Exception as exc:  # noqa: BLE001 (a formula failing for this item's scores: 1/0, log(0))
            raise _FormulaError(f"calculate_output: {_formula_error(exc)}") from None
        return _threshold(grader, value, calls)


def _string_check(grader: Mapping[str, Any], ns: Mapping[str, Any]) -> _Outcome:
    text, reference = render(grader["input"], ns), render(grader["reference"], ns)
    operation = grader["operation"]
    passed = {"eq": text == reference, "ne": text != reference, "like": reference in text,
              "ilike": reference.lower() in text.lower()}[operation]
    return _Outcome(1.0 if passed else 0.0, passed,
                    reason=None if passed else f"{operation} failed: {text[:80]!r} vs {reference[:80]!r}")


def _threshold(grader: Mapping[str, Any], score: float, calls: list[Completion], low: float = 0.0,
               high: float = 1.0) -> _Outcome:
    threshold = grader.get("pass_threshold")
    threshold = (low + high) / 2 if threshold is None else float(threshold)
    passed = score >= threshold
    reason = None if passed else f"score {score:.4g} < pass_threshold {threshold:g}"
    return _Outcome(score, passed, low, high, reason, calls)


def _reply_number(text: str) -> float | None:
    value = strictjson.stored(text.strip(), None)
    if isinstance(value, Mapping):
        value = value.get("result")
    if isinstance(value, str):
        value = strictjson.stored(value.strip(), None)
    return float(value) if _is_number(value) else None


def _reply_label(text: str, labels: Sequence[str]) -> str | None:
    value = strictjson.stored(text.strip(), None)
    label = value.get("result") if isinstance(value, Mapping) else text.strip().strip('"')
    return label if isinstance(label, str) and label in labels else None


#: The most characters of a model grader's raw answer kept with its score.
_ANSWER_CHARS = 4000


def _score_entry(outcome: _Outcome) -> dict[str, Any]:
    """One criterion's entry in ``results.grader_scores``."""
    entry: dict[str, Any] = {"score": outcome.score, "passed": outcome.passed}
    if outcome.kind is not None:
        entry["type"] = outcome.kind
    if outcome.error is not None:
        entry.update(score=None, error=outcome.error)
    else:
        entry["scaled"] = round(_scaled(outcome), 10)  # the score in [0, 1] by its range
    if outcome.answer is not None:
        entry["answer"] = outcome.answer
    return entry


def _scaled(outcome: _Outcome) -> float:
    span = outcome.high - outcome.low
    return min(1.0, max(0.0, (outcome.score - outcome.low) / span)) if span > 0 else 0.0


def build_openai_graders(spec: Mapping[str, Any], judges: JudgeClient | None) -> Matcher:
    """The matcher grading a case by every criterion of ``spec["testing_criteria"]``."""
    criteria = list(spec["testing_criteria"])
    grading = _Grading(spec, judges)
    if needs_judge(spec):
        require_judge(judges, str(spec["judge_service"]), "openai_graders")

    async def match(ctx: MatchContext) -> MatchResult:
        sample = sample_namespace(ctx, with_json=grading.output_json)
        ns = {"item": ctx.case.item if ctx.case.item is not None else {}, "sample": sample}
        outcomes = {}
        for grader in criteria:
            try:
                outcome = await grading.grade(grader, ns, ctx.call)
            except (TemplateError, _FormulaError) as exc:  # this grader, on this item: its result errors
                outcome = _Outcome(0.0, False, error=str(exc), reason=f"errored: {exc}")
            if outcome.failure is not None:  # a judge that did not answer: the cell measured nothing
                return outcome.failure
            outcome.kind = grader["type"]
            outcomes[grader["name"]] = outcome
        return _verdict(outcomes)

    return match


def _verdict(outcomes: Mapping[str, _Outcome]) -> MatchResult:
    failed = [f"{name}: {o.reason}" for name, o in outcomes.items() if not o.passed]
    judge = merge_judges([c for o in outcomes.values() for c in o.calls])
    scores = {name: _score_entry(o) for name, o in outcomes.items()}
    return MatchResult(passed=not failed, score=sum(_scaled(o) for o in outcomes.values()) / len(outcomes),
                       reason="; ".join(failed) or None, grader_scores=scores, judge=judge)
