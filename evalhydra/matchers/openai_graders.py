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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from evalhydra.core import strictjson
from evalhydra.core.openai_templates import (
    ROLES,
    SAMPLING_PARAMS,
    TemplateError,
    render,
)
from evalhydra.core.values import NO_CELL, CallContext, ChatRequest, Completion, MatchResult
from evalhydra.matchers.base import JudgeClient, MatchContext, Matcher
from evalhydra.matchers.common import is_number
from evalhydra.matchers.grader_checks import (
    FormulaError,
    formula,
    formula_error,
    grader_range,
    message_text,
    needs_judge,
    sub_graders,
)
from evalhydra.matchers.judging import invalid_judge_output, judge_call_failed, merge_judges, require_judge
from evalhydra.matchers.python_grader import (
    DEFAULT_TIMEOUT_S,
    PythonGraderError,
    run_python_grader,
)
from evalhydra.matchers.similarity import cosine, similarity

#: cosine's embedding model unless the matcher names one (OpenAI's graders guide uses it).
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-large"
#: What a score model is asked to return (OpenAI's score-model output).
_SCORE_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["steps", "result"],
                 "properties": {
    "steps": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                         "required": ["description", "conclusion"],
                                         "properties": {"description": {"type": "string"},
                                                        "conclusion": {"type": "string"}}}},
    "result": {"type": "number"}}}

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
        low, high = grader_range(grader)
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
        for key, sub in sub_graders(grader).items():
            outcome = await self.grade(sub, ns, call)
            if outcome.failure is not None or outcome.error is not None:
                return outcome
            scores[key], calls = outcome.score, [*calls, *outcome.calls]
        try:
            value = formula(grader["calculate_output"], scores)
        except Exception as exc:  # noqa: BLE001 (a formula failing for this item's scores: 1/0, log(0))
            raise FormulaError(f"calculate_output: {formula_error(exc)}") from None
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
    return float(value) if is_number(value) else None


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
            except (TemplateError, FormulaError) as exc:  # this grader, on this item: its result errors
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
