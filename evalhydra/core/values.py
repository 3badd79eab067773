"""Value objects shared by the loader, services, matchers, runner and store.

They are immutable dataclasses: safe to share between trio tasks, and easy to
turn into store rows. The few made once per cell or per call are
:func:`immutable` (immutable to the type checker, cheap to create); the rest
are frozen at runtime too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = [
    "MAX_TOKEN_COUNT",
    "NOT_FINISHED",
    "ERROR_STATUSES",
    "PASSING",
    "STATUSES",
    "VALIDATION_STATUSES",
    "Status",
    "immutable",
    "Attachment",
    "AttemptRecord",
    "CallContext",
    "CallCount",
    "NO_CELL",
    "Case",
    "ChatRequest",
    "Completion",
    "ErrorKind",
    "ExpectedToolCall",
    "MatchResult",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "arguments_or_empty",
]


_T = TypeVar("_T")


@overload
def immutable(cls: type[_T], /) -> type[_T]: ...
@overload
def immutable(*, kw_only: bool = False) -> Callable[[type[_T]], type[_T]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def immutable(cls: type[_T] | None = None, /, *, kw_only: bool = False) -> Any:
    """A slots dataclass that mypy treats as frozen (assigning a field is a type error) and
    hashes by value as a frozen one does, without runtime freezing.

    A frozen dataclass's ``__init__`` sets every field through ``object.__setattr__``:
    several times what a plain one costs. A chat cell builds about seven such objects, so the
    types made per cell or per call use this.

    Args:
        cls: The class (``@immutable``), or None (``@immutable(kw_only=True)``).
        kw_only: As :func:`dataclasses.dataclass`.
    """
    make = dataclass(slots=True, unsafe_hash=True, kw_only=kw_only)
    return make if cls is None else make(cls)


class Status(StrEnum):
    """A result's status (``results.status``): chat cells PASS, FAIL or ERROR; agent trials
    zrb's five, in its reports' canonical order. The tuples below are spelled from it."""

    EXCELLENT = "EXCELLENT"
    PASS = "PASS"
    FAIL = "FAIL"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"


#: Every status, in the canonical order (plain strings: they are spelled into SQL and reports).
STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
#: The statuses that pass: zig_eval's PASS and the agent validators' EXCELLENT and PASS.
PASSING = frozenset({Status.EXCELLENT.value, Status.PASS.value})
#: Statuses that are infrastructure errors (zrb's ERROR and TIMEOUT): neither pass nor fail.
ERROR_STATUSES: tuple[str, ...] = (Status.ERROR.value, Status.TIMEOUT.value)
#: Statuses a validator (or an agent's ``VERIFICATION_RESULT:`` marker) may give.
VALIDATION_STATUSES: tuple[str, ...] = (Status.EXCELLENT.value, Status.PASS.value, Status.FAIL.value)


#: The reason a cell fails when a reasoning model's thinking was cut before any answer.
NOT_FINISHED = "ReasoningNotFinished"

#: The largest token count a reply or an agent may report: far past any real call, and small enough
#: that the store's sums over millions of cells stay within SQLite's 64-bit integers.
MAX_TOKEN_COUNT = 10**12


class ErrorKind(StrEnum):
    """Why a call or a result failed for a reason other than a wrong answer.

    A result with any error kind is an infrastructure error (status ERROR, never FAIL;
    see :func:`evalhydra.store.rows.is_infra_error`).
    """

    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    CLIENT_ERROR = "client_error"
    TIMEOUT = "timeout"
    CONNECT_ERROR = "connect_error"
    INVALID_RESPONSE = "invalid_response"
    RENDER_ERROR = "render_error"
    MATCHER_ERROR = "matcher_error"
    AGENT_ERROR = "agent_error"
    BATCH_LINE_FAILED = "batch_line_failed"  # a batch's error file has the line, or no file has it
    BATCH_EXPIRED = "batch_expired"  # the batch expired before the line was answered
    BATCH_FAILED = "batch_failed"  # the provider refused the whole batch (validation)
    BATCH_CANCELLED = "batch_cancelled"  # the batch was cancelled before the line was answered
    TOOL_SERVER_ERROR = "tool_server_error"  # a loop's MCP server did not start, died or lost its transport
    ENDPOINT_SILENT = "endpoint_silent"  # connected, but the endpoint never replied: its waiting cells end


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file or image sent with a case (zig_eval ``attachments`` entry).

    ``path`` is relative to ``base`` (None: the registry root) and already checked to stay inside it.
    """

    kind: str  # "image" | "file"
    path: str
    mime_type: str
    label: str | None = None
    base: str | None = None  # the dataset's folder, for a dataset outside the registry


@dataclass(frozen=True, slots=True)
class ExpectedToolCall:
    """One tool call a ``tool_call`` matcher expects (``arguments_json`` optional)."""

    name: str
    arguments_json: str | None = None


@dataclass(frozen=True, slots=True)
class Case:
    """One dataset line.

    Attributes:
        id: The case id, unique within its dataset.
        input: What is sent to the service: a string, a list of chat messages (a
            conversation, also in ``messages``), or any JSON for aiwg cases (sent as text).
        ideal: The reference answer, or None (a blank ideal counts as absent).
        ideals: Every acceptable answer when the dataset lists several (OpenAI evals);
            ``ideal`` is the first.
        messages: The conversation to send, validated, when ``input`` is one.
        expected_tool_calls: For the ``tool_call`` matcher.
        attachments: Files and images rendered into the user message.
        expected: aiwg ``expected`` object; never sent to a judge.
        item: An OpenAI Evals item (the ``item`` namespace of its graders' templates).
        sample: An output recorded elsewhere, graded as the answer by ``service=recorded``.
        tags: Free-form labels.
        tools: The case's own tools, offered instead of the eval's (a BFCL line's functions).
        user: What a simulated user of this case knows and wants (``persona``, ``known_info``, …,
            and the mock's ``script``), filled into the eval's user instructions.
        content_hash: Hash of the whole line; part of the resume key.
        line: 1-based line number in the dataset, for error messages.
    """

    id: str
    input: Any
    ideal: str | None = None
    ideals: tuple[str, ...] = ()
    messages: tuple[dict[str, Any], ...] | None = None
    expected_tool_calls: tuple[ExpectedToolCall, ...] = ()
    attachments: tuple[Attachment, ...] = ()
    expected: Any = None
    item: Any = None
    sample: Any = None  # an output produced elsewhere (an OpenAI Evals jsonl run), for service=recorded
    tags: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    user: Any = None
    content_hash: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model; ``parameters`` is the parsed JSON schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call returned by the model, kept as the provider sent it.

    ``arguments`` is the raw text (``""`` when the provider sent an empty string or none; an
    object's JSON text when it sent a JSON object, with ``arguments_object`` True), ``id`` the
    provider's call id (None when it sent none). :func:`arguments_or_empty` is how tool loops
    and evalhydra's own evals read it.
    """

    name: str
    arguments: str
    id: str | None = None
    arguments_object: bool = False


def arguments_or_empty(arguments: str) -> str:
    """A call's arguments as tool loops read them: ``{}`` for an empty or blank string (as
    providers mean it), else the text unchanged."""
    return arguments if arguments.strip() else "{}"


@immutable
class Usage:
    """Token counts reported by the service (0 when absent)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0  # of the completion tokens, those spent thinking
    reported: bool = True  # False: a stream that sent no usage chunk (the counts are unknown, not 0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.reported and other.reported,
        )


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """What a service is asked: one user turn or a conversation, optional system prompt and tools.

    ``user_content`` is a plain string, or the OpenAI content-part list when the
    case has attachments; with ``messages`` (a conversation) it is the last user
    message's content. ``system_prompt`` None means "use the service's", which is
    prepended only when the conversation has no system message. ``params`` (the
    eval's generation parameters) merge over the service's.
    """

    user_content: str | list[dict[str, Any]]
    model: str | None = None
    system_prompt: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    params: dict[str, Any] | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    case_id: str | None = None  # the case asked (a recorded service names it)
    sample: Any = None  # the case's recorded sample, when its dataset holds one (``service=recorded``)


class CallCount:
    """How many calls a cell has made: batch mode names the first after the cell, the next
    ``key#1``, ``key#2`` … (a judge's call, a refinement's)."""

    __slots__ = ("made",)

    def __init__(self) -> None:
        self.made = 0


@immutable
class CallContext:
    """Who a service call is for, passed with it (never ambient state).

    ``cell_key`` names the cell (a batch line's ``custom_id``), ``trial`` its trial (the response
    cache keeps trial k of a case as trial k), ``use_cache`` whether the response cache may answer
    (a judge's call skips it unless ``cache.judge``); ``count`` is shared by every call of the cell;
    ``traceparent`` and ``baggage`` (W3C: the cell's trace, and its run, case and trial) go with
    every request made for it when telemetry is on.
    """

    cell_key: str | None = None
    trial: int | None = None
    use_cache: bool = True
    traceparent: str | None = None
    baggage: str | None = None
    count: CallCount = field(default_factory=CallCount, compare=False, hash=False)

    def custom_id(self) -> str | None:
        """This call's batch name (None outside a cell), counting it as made."""
        if self.cell_key is None:
            return None
        made, self.count.made = self.count.made, self.count.made + 1
        return self.cell_key if made == 0 else f"{self.cell_key}#{made}"


#: The context of a call made outside any cell (a check, a test).
NO_CELL = CallContext()


@immutable
class AttemptRecord:
    """One HTTP attempt, for the ``attempts`` audit table."""

    attempt: int
    status_code: int | None
    error_kind: ErrorKind | None
    latency_ms: float
    error_message: str | None = None


@immutable
class Completion:
    """The outcome of one logical call (all its retries). Never an exception.

    ``error_kind`` is None on success. On failure ``output`` is "" and
    ``error_message`` holds the seed's reason (``error.message`` of the body, or
    the error's name).
    """

    output: str
    model: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    status_code: int | None = None
    attempt_count: int = 1
    retried: bool = False
    latency_ms: float = 0.0
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    error_detail: str | None = None  # more than the seed's reason says (a render error's file and byte)
    attempts: tuple[AttemptRecord, ...] = ()
    cost_usd: float = 0.0
    reasoning: str | None = None  # the thinking taken out of ``output`` (a reasoning model's)
    reasoning_finished: bool = True  # False: the thinking was cut before any answer
    waited_ms: float = 0.0  # before the first attempt: for a slot of the service and its endpoint
    cached: bool = False  # the answer came from the response cache (nothing was sent or paid)
    cached_latency_ms: float | None = None  # a cached answer's latency when it was first fetched
    saved_usd: float = 0.0  # cached: what sending it again would have cost; batched: the discount
    batched: bool = False  # answered through a batch job (its latency: from submission to the output)
    ttft_ms: float | None = None  # streamed: the first content or reasoning delta
    first_answer_ms: float | None = None  # streamed: the first answer delta, after any thinking
    output_tps: float | None = None  # streamed: completion tokens per second after the first delta
    finish_reason: str | None = None  # how the reply ended (``stop``, ``tool_calls``, ``length``…)
    response_id: str | None = None  # the reply's ``id``, as the service named it
    wire: Any = None  # service.record_wire: the reply's content and tool calls as sent

    @property
    def ok(self) -> bool:
        """True when the service answered with a usable completion."""
        return self.error_kind is None


@immutable
class MatchResult:
    """A matcher's verdict.

    Attributes:
        passed: Whether the output passes.
        score: In [0, 1]; 1/0 for deterministic matchers.
        reason: The failure reason (None on pass), using the seed's exact strings.
        details: Matcher-specific extras stored as JSON (per-part results, paths).
        feedback, rubric_scores, failure_category, suggested_fix: rubric judges.
        grader_scores: Each named criterion's ``{"score", "passed"}`` (``openai_graders``).
        judge: The judge call's outcome, when a model judged.
        error_kind: Set when matching itself failed (a matcher raised, a judge
            call failed for infrastructure reasons).
    """

    passed: bool
    score: float
    reason: str | None = None
    details: dict[str, Any] | None = None
    feedback: str | None = None
    rubric_scores: dict[str, float] | None = None
    failure_category: str | None = None
    suggested_fix: str | None = None
    judge: Completion | None = None
    error_kind: ErrorKind | None = None
    grader_scores: dict[str, dict[str, Any]] | None = None
