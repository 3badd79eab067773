"""What one chat cell does: ask the service, score the answer, build the store row.

A cell is one (eval, case, service, model, trial). The functions here never
raise for a per-call problem; they return a row whose ``error_kind`` says what
went wrong, so one failure never cancels its siblings.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.masking import mask_text
from evalhydra.core.messages import as_text
from evalhydra.core.trio_util import RunClock
from evalhydra.core.values import (
    NOT_FINISHED,
    CallContext,
    Case,
    ChatRequest,
    Completion,
    ErrorKind,
    MatchResult,
)
from evalhydra.execute.conversation import run_conversation
from evalhydra.execute.mcp_tools import McpTools, McpUnavailable, SharedServers, open_mcp
from evalhydra.execute.rows import attempt_row, chat_row
from evalhydra.execute.services import JudgeServices
from evalhydra.execute.toolbox import Toolbox
from evalhydra.execute.toolloop import LoopOutcome, run_loop
from evalhydra.execute.user_side import SimulatedUser, user_instructions, user_toolbox
from evalhydra.matchers.base import JudgeClient, MatchContext, Matcher
from evalhydra.matchers.factory import judge_services_of
from evalhydra.matchers.rubric import refinement_input
from evalhydra.plan.cells import CellJob
from evalhydra.plan.model import EvalPlan
from evalhydra.plan.tools import LoopPlan, McpServerPlan
from evalhydra.plan.users import UserPlan
from evalhydra.registry.attachments import RenderError
from evalhydra.services.base import EndpointReport, RunServices, Service
from evalhydra.services.render import render_error_completion, render_request
from evalhydra.store.rows import ResultRow
from evalhydra.telemetry.cells import baggage, traceparent

__all__ = ["ChatCellRunner", "as_wired"]

def _input_text(case: Case) -> str:
    """The text a refinement attempt rewrites: the input, or a conversation's last user message."""
    if case.messages:
        return as_text(next(m for m in reversed(case.messages) if m["role"] == "user")["content"])
    return case.input if isinstance(case.input, str) else json.dumps(case.input, ensure_ascii=False)


class ChatCellRunner:
    """Executes chat cells against one service with per-eval matchers."""

    def __init__(
        self,
        service: Service,
        matchers: dict[str, Matcher],
        registry_root: Path,
        run_id: str,
        judges: JudgeClient | None = None,
        *,
        secrets: list[str] | None = None,
        nursery: trio.Nursery | None = None,
        services: RunServices | None = None,
        traced: bool = False,
    ) -> None:
        self.service = service
        self.services = services  # the run's open services: their status and refusals
        self.secrets = secrets or []  # every secret the run sends: masked in what a matcher says
        self.matchers = matchers
        self.root = registry_root
        self.run_id = run_id
        self.traced = traced  # each request carries its cell's traceparent (telemetry)
        self.judges = judges
        self.config: ServiceConfig = service.config
        self.model = self.config.model or self.config.default_model
        self._judge_cache: dict[str, str | None] = {}
        # A case's trials run one after another: they share its rendered request, so the
        # service encodes its body once (see OpenAICompatService.complete).
        self._rendered: tuple[Case, EvalPlan, ChatRequest] | None = None
        self._clock = RunClock()
        self._mcp_processes: trio.CapacityLimiter | None = None  # MCP server processes at once (the run's)
        self.shared = SharedServers(nursery) if nursery is not None else None  # scope: run servers

    def status(self) -> str:
        """The run's services' note for the progress line."""
        return self.services.status() if self.services is not None else ""

    def refused(self) -> list[EndpointReport]:
        """The run's endpoints that refused requests (429)."""
        return self.services.refused() if self.services is not None else []

    async def run(self, job: CellJob) -> tuple[ResultRow, list[dict[str, Any]]]:
        """Execute one cell; return its result row and its attempt rows."""
        # every call of the cell is made for it: its trial keys the response cache (trial k of a
        # case stays trial k), its key names its batch lines
        call = CallContext(job.key, job.trial) if not self.traced else CallContext(
            job.key, job.trial, traceparent=traceparent(self.run_id, job.key),
            baggage=baggage(self.run_id, job.case.id, job.trial))
        if job.eval.loop is not None:
            return await self._run_loop(job, job.eval.loop, call)
        if job.eval.refinement_attempts == 1:
            return await self._run_once(job, call)
        started = self._clock.now()
        history: list[dict[str, Any]] = []
        calls: list[tuple[str, Completion]] = []
        labels: list[str] = []  # per call: "candidate<attempt>" / "judge<attempt>"
        text = _input_text(job.case)
        feedback = ""
        for attempt in range(1, job.eval.refinement_attempts + 1):
            asked = None if attempt == 1 else refinement_input(feedback, text)
            completion = await self._generate(job, call, asked)
            calls.append(("candidate", completion))
            labels.append(f"candidate{attempt}")
            match = await self._score(job, completion, call)
            if match.judge is not None:
                calls.append(("judge", match.judge))
                labels.append(f"judge{attempt}")
            history.append(
                {
                    "attempt": attempt,
                    "output": completion.output,
                    "score": match.score,
                    "pass": match.passed,
                    "feedback": match.feedback or match.reason or "",
                }
            )
            feedback = match.feedback or match.reason or ""
            if match.passed or match.error_kind is not None or completion.error_kind is not None:
                break
        latency = (self._clock.now() - started) * 1000
        row = chat_row(job, self.run_id, self.config.name, self.model, completion, match, calls,
                       self._judge_names(job.eval), attempts=len(history), history=history,
                       latency_ms=latency)
        return row, self._attempt_rows(job, calls, labels if len(history) > 1 else None)

    async def _run_once(self, job: CellJob, call: CallContext) -> tuple[ResultRow, list[dict[str, Any]]]:
        """A cell of an eval without refinement: one generation, scored (no attempt history)."""
        started = self._clock.now()
        completion = await self._generate(job, call)
        match = await self._score(job, completion, call)
        calls = [("candidate", completion)]
        if match.judge is not None:
            calls.append(("judge", match.judge))
        # the wait for a slot of the endpoint is the run's queue, not the service's latency; a batch
        # line's is from its batch's submission to the output's download (perhaps in an earlier run)
        latency = completion.latency_ms if completion.batched else (
            (self._clock.now() - started) * 1000 - completion.waited_ms)
        row = chat_row(job, self.run_id, self.config.name, self.model, completion, match, calls,
                       self._judge_names(job.eval), attempts=1, history=None, latency_ms=latency)
        return row, self._attempt_rows(job, calls, None)

    async def _run_loop(self, job: CellJob, loop: LoopPlan,
                        call: CallContext) -> tuple[ResultRow, list[dict[str, Any]]]:
        """A tool loop's cell: the conversation run to its end, the answer and the path scored."""
        started = self._clock.now()
        try:
            request = await render_request(job.case, job.eval.tools, self.root, job.eval.params)
        except RenderError as exc:
            return await self._failed(job, render_error_completion(exc, self.model), started, call)
        try:
            outcome = await self._loop_with_servers(request, loop, job, call)
        except McpUnavailable as exc:  # a tool server down is the cell's infrastructure error
            down = Completion(output="", model=self.model, error_kind=ErrorKind.TOOL_SERVER_ERROR,
                              error_message=mask_text(str(exc), self.secrets))
            return await self._failed(job, down, started, call)
        trajectory = self._masked(outcome.trajectory())
        match = await self._score(job, outcome.completion, call, trajectory)
        match = replace(match, details={**(match.details or {}), "trajectory": trajectory})
        calls = [("candidate", turn) for turn in outcome.turns]
        labels = [f"turn{i}" for i in range(1, len(calls) + 1)]
        calls += [("user", turn) for turn in outcome.user_turns]
        labels += [f"user{i}" for i in range(1, len(outcome.user_turns) + 1)]
        if match.judge is not None:
            calls.append(("judge", match.judge))
            labels.append("judge")
        row = chat_row(job, self.run_id, self.config.name, self.model, outcome.completion, match, calls,
                       self._judge_names(job.eval), attempts=1, history=None,
                       latency_ms=(self._clock.now() - started) * 1000)
        return row, self._attempt_rows(job, calls, labels)

    async def _failed(self, job: CellJob, completion: Completion, started: float,
                      call: CallContext) -> tuple[ResultRow, list[dict[str, Any]]]:
        """The row of a loop's cell that failed before its conversation could run."""
        row = chat_row(job, self.run_id, self.config.name, self.model, completion,
                       await self._score(job, completion, call), [("candidate", completion)],
                       self._judge_names(job.eval), attempts=1, history=None,
                       latency_ms=(self._clock.now() - started) * 1000)
        return row, []

    def _masked(self, trajectory: dict[str, Any]) -> dict[str, Any]:
        """The trajectory with every secret the run sends masked (a tool or an MCP server's stderr
        may print one)."""
        if not self.secrets:
            return trajectory
        masked = json.loads(mask_text(json.dumps(trajectory, ensure_ascii=False), self.secrets) or "{}")
        return masked if isinstance(masked, dict) else trajectory

    async def _loop_with_servers(self, request: ChatRequest, loop: LoopPlan, job: CellJob,
                                 call: CallContext) -> LoopOutcome:
        """The loop, with the eval's MCP servers started for this cell (their tools offered too)."""
        if not loop.mcp:
            toolbox = Toolbox(loop, job.eval.tools, self.root, initial_state=_initial_state(job.case))
            return await self._loop(request, loop, toolbox, job, call)
        if self._mcp_processes is None:
            self._mcp_processes = trio.CapacityLimiter(loop.max_processes)
        taken = {t.name for t in job.eval.tools}
        own = tuple(s for s in loop.mcp if s.scope == "cell")
        shared = tuple(s for s in loop.mcp if s.scope == "run")
        run_tools = await self._shared_tools(shared, taken)
        async with open_mcp(own, taken | set(run_tools.routes), self._mcp_processes) as servers:
            servers = servers.joined(run_tools)
            tools = (*job.eval.tools, *servers.specs)
            toolbox = Toolbox(loop, tools, self.root, servers, _initial_state(job.case))
            outcome = await self._loop(replace(request, tools=tools), loop, toolbox, job, call)
            outcome.stderr = servers.stderr_tails()
            return outcome

    async def _loop(self, request: ChatRequest, loop: LoopPlan, toolbox: Toolbox, job: CellJob,
                    call: CallContext) -> LoopOutcome:
        """The cell's tool loop, or its conversation with a simulated user (the eval's ``user``)."""
        plan = job.eval.user
        if plan is None:
            return await run_loop(self.service, request, loop, toolbox, call)
        user = SimulatedUser(self._user_service(plan), plan, user_instructions(plan, job.case, job.key),
                             user_toolbox(plan, self.root, _initial_state(job.case)))
        return await run_conversation(self.service, user, request, loop, toolbox, call)

    def _user_service(self, plan: UserPlan) -> Service:
        """The service that plays the simulated user: its own, or the run's."""
        if plan.service is None or plan.service == self.config.name:
            return self.service
        opened = self.judges.services if isinstance(self.judges, JudgeServices) else {}
        return opened[plan.service]  # the plan opened it (plan.build._judges)

    async def _shared_tools(self, shared: tuple[McpServerPlan, ...], taken: set[str]) -> McpTools:
        """The tools of the run's shared servers (``scope: run``), started on first use."""
        if not shared:
            return McpTools()
        if self.shared is None:
            raise McpUnavailable("scope: run needs a runner that holds the run's sessions")
        return await self.shared.tools(shared, taken)

    async def _generate(self, job: CellJob, call: CallContext, refinement: str | None = None) -> Completion:
        """Ask the service the case's own input, or ``refinement`` (a refinement attempt's) in its
        place; read the answer as the eval's wire does (:func:`as_wired`)."""
        return as_wired(job.eval.wire, await self._ask(job, call, refinement))

    async def _ask(self, job: CellJob, call: CallContext, refinement: str | None) -> Completion:
        case = job.case if refinement is None else _with_input(job.case, refinement)
        rendered = self._rendered
        if refinement is None and rendered is not None and rendered[0] is case and rendered[1] is job.eval:
            return await self.service.complete(rendered[2], call)
        try:
            request = await render_request(case, job.eval.tools, self.root, job.eval.params)
        except RenderError as exc:
            return render_error_completion(exc, self.model)
        if refinement is None:
            self._rendered = (case, job.eval, request)
        return await self.service.complete(request, call)

    async def _score(self, job: CellJob, completion: Completion, call: CallContext,
                     trajectory: dict[str, Any] | None = None) -> MatchResult:
        if not completion.ok:
            details = {"error_detail": completion.error_detail} if completion.error_detail else None
            return MatchResult(passed=False, score=0.0, reason=completion.error_message,
                               error_kind=completion.error_kind, details=details)
        if not completion.reasoning_finished:  # thinking cut by max_tokens: no answer to score
            return MatchResult(passed=False, score=0.0, reason=NOT_FINISHED)
        ctx = MatchContext(case=job.case, output=completion.output, tool_calls=completion.tool_calls,
                           reasoning=completion.reasoning, trajectory=trajectory, call=call)
        match = await self.matchers[job.eval.id](ctx)
        if not self.secrets or not (match.reason or match.feedback or match.suggested_fix):
            return match
        return replace(match, reason=mask_text(match.reason, self.secrets),
                       feedback=mask_text(match.feedback, self.secrets),
                       suggested_fix=mask_text(match.suggested_fix, self.secrets))

    def _judge_names(self, ev: EvalPlan) -> str | None:
        if ev.id not in self._judge_cache:
            self._judge_cache[ev.id] = ",".join(sorted(judge_services_of(ev.matcher))) or None
        return self._judge_cache[ev.id]

    def _attempt_rows(
        self, job: CellJob, calls: list[tuple[str, Completion]], labels: list[str] | None
    ) -> list[dict[str, Any]]:
        """Audit rows of every HTTP attempt; calls are ``candidate``/``judge`` (``labels`` None)
        when one generation ran, else numbered by refinement attempt (``candidate2``, ``judge2``)."""
        names = labels or [kind for kind, _ in calls]
        return [attempt_row(job.key, self.run_id, name, record)
                for (_, completion), name in zip(calls, names, strict=True) for record in completion.attempts]


def _initial_state(case: Case) -> Any:
    """A τ²-bench task's initial state (None for any other case)."""
    task = case.expected.get("tau2") if isinstance(case.expected, dict) else None
    return task.get("initial_state") if isinstance(task, dict) else None


def _with_input(case: Case, text: str) -> Case:
    """The case with its input (a conversation: its last user message) replaced by ``text``."""
    if not case.messages:
        return replace(case, input=text)
    messages = list(case.messages)
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    messages[last] = {**messages[last], "content": text}
    return replace(case, input=messages, messages=tuple(messages))


def as_wired(wire: str, completion: Completion) -> Completion:
    """``completion`` as the eval's wire reads it: for ``zig_eval``, a tool call whose arguments
    came as a JSON object (not a string) makes the reply ``MalformedSuccessPayload``, as zig_eval
    refuses it; tool loops and evalhydra's own evals accept such calls."""
    if wire != "zig_eval" or not any(call.arguments_object for call in completion.tool_calls):
        return completion
    return replace(completion, output="", tool_calls=(), error_kind=ErrorKind.INVALID_RESPONSE,
                   error_message="MalformedSuccessPayload",
                   error_detail="a tool call's arguments came as a JSON object, not a JSON string")
