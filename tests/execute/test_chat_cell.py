"""``ChatCellRunner`` on its own, against a scripted in-process :class:`Service`.

The fake is the seam's whole contract (a config, ``complete``, ``aclose``), so these
tests pin what one cell does with what a service answers, with no server, store or
runner around it: the row's verdict, accounting and attempts; errors kept apart
from wrong answers; and the refinement loop's requests and history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import (
    NO_CELL,
    AttemptRecord,
    CallContext,
    Case,
    ChatRequest,
    Completion,
    ErrorKind,
    MatchResult,
    Usage,
)
from evalhydra.execute.chat_cell import ChatCellRunner
from evalhydra.matchers.base import MatchContext
from evalhydra.plan.cells import CellJob
from evalhydra.plan.model import EvalPlan
from evalhydra.services.base import Service


class ScriptedService:
    """Answers each request with the next scripted completion, and keeps the requests."""

    def __init__(self, *answers: Completion) -> None:
        self.config = ServiceConfig(name="scripted", default_model="m-1")
        self.answers = list(answers)
        self.requests: list[ChatRequest] = []

    @property
    def name(self) -> str:
        return self.config.name

    async def complete(self, request: ChatRequest, context: CallContext = NO_CELL) -> Completion:
        self.requests.append(request)
        return self.answers.pop(0)

    async def aclose(self) -> None:
        pass


async def exact(ctx: MatchContext) -> MatchResult:
    ok = ctx.output.strip() == ctx.case.ideal
    if ok:
        return MatchResult(passed=True, score=1.0)
    return MatchResult(passed=False, score=0.0, reason="output did not exactly match ideal",
                       feedback="Say only the capital.")


def answer(text: str, **fields: Any) -> Completion:
    return Completion(output=text, model="m-1-2026", usage=Usage(prompt_tokens=10, completion_tokens=2),
                      status_code=200, cost_usd=0.5, **fields)


def job(refinement_attempts: int = 1, trial: int = 1) -> CellJob:
    ev = EvalPlan(id="geo.capital", group="geo", description="", dataset_path=None, split="test",
                  matcher={"kind": "exact_match"}, trials=1, tools=(),
                  refinement_attempts=refinement_attempts)
    return CellJob(key=f"k{trial}", eval=ev, case=Case(id="fr", input="Capital of France?", ideal="Paris"),
                   trial=trial)


def runner(service: Service) -> ChatCellRunner:
    return ChatCellRunner(service, {"geo.capital": exact}, Path("."), "run-1")


async def test_a_right_answer_is_a_pass_with_the_service_accounting() -> None:
    service = ScriptedService(answer("Paris"))
    row, attempts = await runner(service).run(job(trial=2))
    assert (row.status, row.passed, row.score, row.failure_reason) == ("PASS", True, 1.0, None)
    assert (row.cell_key, row.run_id, row.eval_id, row.group, row.case_id, row.run_index) == (
        "k2", "run-1", "geo.capital", "geo", "fr", 2)
    # keyed by the model asked for; the one the reply named is kept beside it
    assert (row.model, row.requested_model, row.reply_model) == ("m-1", "m-1", "m-1-2026")
    assert row.service_name == "scripted"
    assert (row.prompt_tokens, row.completion_tokens, row.cost_usd, row.judge_service) == (10, 2, 0.5, None)
    assert (row.output, row.input, row.ideal, row.attempts) == ("Paris", "Capital of France?", "Paris", 1)
    assert attempts == [] and [r.user_content for r in service.requests] == ["Capital of France?"]


async def test_a_wrong_answer_fails_with_the_matchers_reason() -> None:
    row, _ = await runner(ScriptedService(answer("Lyon"))).run(job())
    assert (row.status, row.passed, row.score) == ("FAIL", False, 0.0)
    assert row.failure_reason == "output did not exactly match ideal" and row.error_kind is None


async def test_a_failed_call_is_an_error_never_a_wrong_answer_and_keeps_its_attempts() -> None:
    tries = tuple(AttemptRecord(attempt=n, status_code=503, error_kind=ErrorKind.SERVER_ERROR, latency_ms=4.0,
                                error_message="busy") for n in (1, 2))
    failed = Completion(output="", model="m-1", status_code=503, attempt_count=2, retried=True,
                        error_kind=ErrorKind.SERVER_ERROR, error_message="busy", attempts=tries)
    row, attempts = await runner(ScriptedService(failed)).run(job())
    assert (row.status, row.passed, row.error_kind) == ("ERROR", False, "server_error")
    assert row.failure_reason == "busy"
    assert (row.model, row.attempt_count, row.retried) == ("m-1", 2, True)  # the model asked for
    assert [(a["call"], a["attempt"], a["status_code"]) for a in attempts] == [
        ("candidate", 1, 503), ("candidate", 2, 503)]


async def test_refinement_sends_the_feedback_and_stops_at_the_first_pass() -> None:
    service = ScriptedService(answer("Lyon"), answer("Paris"), answer("never asked"))
    row, _ = await runner(service).run(job(refinement_attempts=3))
    assert (row.status, row.attempts) == ("PASS", 2)
    second = service.requests[1].user_content
    assert "Feedback: Say only the capital." in second
    assert second.endswith("Original request: Capital of France?")
    assert [h["output"] for h in row.attempt_history or []] == ["Lyon", "Paris"]
    assert (row.prompt_tokens, row.cost_usd) == (20, 1.0)  # both generations are paid for
    assert len(service.answers) == 1
