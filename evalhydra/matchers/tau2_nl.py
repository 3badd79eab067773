"""A τ²-bench task's natural-language assertions, graded by a judge.

τ²-bench's ``NL_ASSERTION`` component asks a model whether the agent met each assertion, given the
conversation as ``role: content`` lines, and expects ``{"results": [{"expectedOutcome",
"reasoning", "metExpectation"}]}``; the component is 1 when every result is met. The judge is one
of the run's services (the matcher's ``judge_service``), so its calls go through retries, limits,
the cache and cost accounting like any judge's. The built-in mock answers this prompt too
(:mod:`evalhydra.services.mock.judge_replies`).
"""

from __future__ import annotations

import json
from typing import Any

from evalhydra.core.values import CallContext, ChatRequest, Completion, MatchResult
from evalhydra.matchers.base import JudgeClient
from evalhydra.matchers.judging import invalid_judge_output, judge_call_failed

__all__ = ["NL_PROMPT_MARK", "NL_SYSTEM_PROMPT", "grade_assertions"]

#: The line that marks the judge prompt (the mock recognises it).
NL_PROMPT_MARK = "Grade each expected outcome on its own."
NL_SYSTEM_PROMPT = f"""You will be given a list of expected outcomes and a conversation between an \
agent and a customer, collected during a test. Decide whether the agent satisfies each expected outcome. \
{NL_PROMPT_MARK}

Answer with a JSON object only:
{{"results": [{{"expectedOutcome": "<the outcome, as given>", "reasoning": "<short>", \
"metExpectation": true or false}}]}}"""


async def grade_assertions(judges: JudgeClient, service: str, model: str | None, assertions: list[str],
                           transcript: list[dict[str, Any]], call: CallContext
                           ) -> tuple[float | None, list[dict[str, Any]], Completion | MatchResult]:
    """Ask the judge about ``assertions``: (the component, 1 or 0; each check; the judge's call),
    or (None, [], the result to return) when the judge failed or answered out of shape."""
    lines = "\n".join(f"{m.get('role')}: {m.get('content')}" for m in transcript
                      if m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str))
    prompt = f"conversation:\n{lines}\n\nexpectedOutcomes:\n{json.dumps(assertions, ensure_ascii=False)}"
    request = ChatRequest(user_content=prompt, model=model, system_prompt=NL_SYSTEM_PROMPT,
                          messages=({"role": "system", "content": NL_SYSTEM_PROMPT},
                                    {"role": "user", "content": prompt}))
    completion = await judges.judge(service, request, call)
    if completion.error_kind is not None:
        return None, [], judge_call_failed(completion)
    results = _results(completion.output)
    if results is None:
        return None, [], invalid_judge_output(completion, "the judge's answer has no results list of"
                                                          " {expectedOutcome, metExpectation}")
    checks = [{"assertion": r.get("expectedOutcome"), "met": r.get("metExpectation") is True,
               "reasoning": r.get("reasoning")} for r in results]
    return (1.0 if checks and all(c["met"] for c in checks) else 0.0), checks, completion


def _results(output: str) -> list[dict[str, Any]] | None:
    text = output.strip()
    if text.startswith("```"):
        text = text.strip("`").split("\n", 1)[-1]
    try:
        data = json.loads(text)
    except ValueError:
        return None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        return None
    return results
