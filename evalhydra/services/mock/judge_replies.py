"""The mock as a judge: a ``model_grade`` prompt gets a JSON verdict (passing when the output and
the ideal contain one another, or erring on purpose with ``judge_sensitivity`` and
``judge_specificity``), a rubric prompt gets a score per criterion (1.0, or 0.3 when the output
holds ``BAD``), and a τ²-bench natural-language assertions prompt gets a result per assertion
(met, unless it quotes a 'phrase' the conversation does not hold)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from evalhydra.services.mock.text import message_text

__all__ = ["judge_draw", "judge_reply"]


_GRADE_PREFIX = "You are grading an LLM or product response for an eval."


#: The line of the tau2 matcher's assertions prompt (``evalhydra.matchers.tau2_nl.NL_PROMPT_MARK``).
_NL_MARK = "Grade each expected outcome on its own."
_QUOTED = re.compile(r"'([^']+)'")


_WEIGHTS = re.compile(r"^\s*Weights:\s*(.+)$", re.M)


_WEIGHT_PAIR = re.compile(r"([A-Za-z_][\w-]*)\s*=\s*([0-9]*\.?[0-9]+)")


_RUBRIC_KEYS = re.compile(r'"rubric_scores"\s*:\s*\{([^}]*)\}')


_THRESHOLD = re.compile(r"score\s*>=\s*([0-9]*\.?[0-9]+)")


_OUTPUT_HEAD = re.compile(r"^(?:Generated output|Output produced by the generator):[ \t]*\n?", re.M)


def _all_text(payload: dict[str, Any]) -> str:
    messages = payload.get("messages") or []
    return "\n".join(message_text(m.get("content")) for m in messages if isinstance(m, dict))


def judge_draw(chance: Callable[[], float] | None,
                errors: tuple[float, float] | None) -> Callable[[bool], bool] | None:
    """The verdict a judge with these error rates gives an output that is right (True) or wrong."""
    if errors is None or chance is None:
        return None
    sensitivity, specificity = errors
    return lambda right: chance() < (sensitivity if right else 1 - specificity)


def judge_reply(payload: dict[str, Any], text: str,
                 verdict: Callable[[bool], bool] | None = None) -> str | None:
    if text.lstrip().startswith(_GRADE_PREFIX):
        return _grade_reply(text, verdict)
    everything = _all_text(payload)
    if _NL_MARK in everything:
        return _assertions_reply(text)
    if "rubric_scores" in everything:
        return _rubric_reply(everything, text)
    return None


def _section(text: str, title: str) -> str | None:
    """Return the body of a ``Title:\\n...`` section, up to the next section title."""
    match = re.search(rf"(?:^|\n){re.escape(title)}:\n", text)
    if match is None:
        return None
    rest = text[match.end() :]
    end = re.search(r"\n\n[A-Z][A-Za-z ]*:\n", rest)
    return (rest[: end.start()] if end else rest).strip()


def _grade_reply(text: str, verdict: Callable[[bool], bool] | None = None) -> str:
    output = _section(text, "Candidate output") or ""
    ideal = _section(text, "Ideal answer")
    try:
        passing = float(_section(text, "Passing score") or "0.5")
    except ValueError:
        passing = 0.5
    if ideal is None or ideal == "No ideal answer was provided.":
        score = 1.0 if output else 0.0
        reason = "Candidate output is non-empty." if output else "Candidate output is empty."
    else:
        out, want = output.lower(), ideal.lower()
        match = bool(out) and bool(want) and (want in out or out in want)
        score = 1.0 if match else 0.0
        reason = (
            "Candidate output matches the ideal answer."
            if match
            else "Candidate output does not match the ideal answer."
        )
    if verdict is not None:  # a judge that errs: its verdict drawn from its error rates
        drawn = 1.0 if verdict(score >= passing) else 0.0
        if drawn != score:
            reason = f"A judge error drawn on purpose (the truth: {reason[0].lower()}{reason[1:]})"
        score = drawn
    return json.dumps({"score": score, "passed": score >= passing, "reason": reason})


def _rubric_weights(prompt: str) -> dict[str, float]:
    line = _WEIGHTS.search(prompt)
    if line:
        weights = {k.lower(): float(v) for k, v in _WEIGHT_PAIR.findall(line.group(1))}
        if weights:
            return weights
    block = _RUBRIC_KEYS.search(prompt)
    if block:
        keys = re.findall(r'"(\w+)"\s*:', block.group(1))
        if keys:
            return {k.lower(): 1.0 for k in keys}
    return {"overall": 1.0}


def _generated_output(text: str) -> str:
    head = _OUTPUT_HEAD.search(text)
    if head is None:
        return ""
    rest = text[head.end() :]
    end = rest.rfind("\n\nScore the output.")
    return (rest[:end] if end >= 0 else rest).strip()


def _rubric_reply(everything: str, text: str) -> str:
    weights = _rubric_weights(everything)
    output = _generated_output(text)
    each = 1.0 if output and "BAD" not in output else 0.3
    total = sum(weights.values()) or 1.0
    score = round(sum(w * each for w in weights.values()) / total, 4)
    threshold = _THRESHOLD.search(everything)
    passed = score >= (float(threshold.group(1)) if threshold else 0.85)
    result: dict[str, Any] = {
        "score": score,
        "pass": passed,
        "feedback": "",
        "rubric_scores": dict.fromkeys(weights, each),
        "failure_category": None,
        "suggested_fix": None,
    }
    if not passed:
        bad = "Output contains BAD content" if output else "Output is empty"
        fix = "Remove BAD content" if output else "Produce a non-empty output"
        result.update(feedback=bad, failure_category="content", suggested_fix=fix)
    body = json.dumps(result, indent=2)
    return f"```json\n{body}\n```" if "MOCK_FENCE" in everything else body


def _assertions_reply(text: str) -> str:
    """Each expected outcome met unless it quotes a phrase the conversation lacks (case-insensitive)."""
    conversation, _, listed = text.partition("expectedOutcomes:")
    try:
        outcomes = json.loads(listed.strip())
    except ValueError:
        outcomes = []
    said = conversation.lower()
    results = [{"expectedOutcome": o, "reasoning": "mock",
                "metExpectation": all(q.lower() in said for q in _QUOTED.findall(str(o)))} for o in outcomes]
    return json.dumps({"results": results})
