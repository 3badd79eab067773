"""The typed rows the store writes, and the rules that classify them.

:class:`ResultRow` is the one shape of a ``results`` row: every cell kind (chat,
agent, re-judged) builds one, and the store writes exactly its declared
columns. A misspelt field is a ``TypeError`` where the row is built, never a
silent NULL.

The infrastructure-error rule lives here in both of its forms, side by side:
:func:`is_infra_error` for Python and :func:`infra_error_sql` for SQL.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from operator import attrgetter
from typing import Any

from evalhydra.core.values import ERROR_STATUSES, STATUSES

__all__ = [
    "INFRA_ERROR_SQL",
    "MAX_STORED_OUTPUT_CHARS",
    "RESULT_STATUSES",
    "ResultRow",
    "cap_output",
    "checked_row",
    "storable",
    "infra_error_sql",
    "is_infra_error",
    "now_iso",
    "verdict_sql",
]

#: Every value of ``results.status``: chat cells PASS/FAIL/ERROR, agent trials zrb's five.
RESULT_STATUSES = STATUSES


def is_infra_error(error_kind: str | None, status: str | None) -> bool:
    """True when a result says nothing about the answer: an HTTP failure, a timeout,
    an agent ERROR/TIMEOUT. Such results are neither passes nor failures, are left
    out of pass rates, and are re-run by ``run.retry_errors``.

    The SQL twin is :func:`infra_error_sql`.
    """
    return error_kind is not None or status in ERROR_STATUSES


def infra_error_sql(alias: str = "") -> str:
    """The SQL twin of :func:`is_infra_error` over ``results`` (``alias`` like ``"r."``)."""
    statuses = ", ".join(f"'{s}'" for s in ERROR_STATUSES)
    return f"({alias}error_kind is not null or coalesce({alias}status, '') in ({statuses}))"


#: :func:`infra_error_sql` without a table alias.
INFRA_ERROR_SQL = infra_error_sql()


@dataclass(slots=True, kw_only=True)
class ResultRow:
    """One ``results`` row: one cell's outcome. Column names are the store format."""

    cell_key: str
    run_id: str
    group: str
    eval_id: str
    service_name: str
    model: str | None
    requested_model: str | None = None
    run_index: int
    case_id: str
    kind: str
    status: str
    input: Any = None
    ideal: str | None = None
    output: str | None = None
    tool_calls: Any = None  # [{"name", "arguments"}]
    passed: bool
    score: float | None = None
    failure_reason: str | None = None
    error_kind: str | None = None
    status_code: int | None = None
    attempt_count: int | None = None
    retried: bool | None = None
    judge_attempt_count: int | None = None
    judge_retried: bool | None = None
    judge_status_code: int | None = None
    judge_service: str | None = None
    judge_model: str | None = None
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    judge_prompt_tokens: int | None = None
    judge_completion_tokens: int | None = None
    cost_usd: float | None = None
    judge_cost_usd: float | None = None
    details: Any = None
    feedback: str | None = None
    rubric_scores: Any = None
    failure_category: str | None = None
    suggested_fix: str | None = None
    pass_threshold: float | None = None
    attempts: int | None = None
    attempt_history: Any = None
    duration_s: float | None = None
    exit_code: int | None = None
    log_path: str | None = None
    stdout_log_path: str | None = None
    trial_dir: str | None = None
    case_hash: str | None = None
    evaluated_at: str | None = None
    reply_model: str | None = None  # the model the reply named (``model`` is the one asked for)
    reasoning: str | None = None  # a reasoning model's thinking, taken out of ``output``
    reasoning_tokens: int | None = None  # of ``completion_tokens``, those spent thinking
    ttft_ms: float | None = None  # streamed: time to the first content or reasoning delta
    first_answer_ms: float | None = None  # streamed: time to the first answer delta, after the thinking
    output_tps: float | None = None  # streamed: completion tokens per second after the first delta
    cached: int | None = None  # 1: the answer came from the response cache (nothing sent or paid)
    cached_latency_ms: float | None = None  # a cached answer's latency when it was first fetched
    saved_usd: float | None = None  # cached: what sending it again would have cost; batched: the discount
    batched: int | None = None  # 1: answered through a batch job (service.batch), at its discount
    grader_scores: Any = None  # openai_graders: each criterion's {"score", "passed"}, by name
    finish_reason: str | None = None  # a chat cell's reply: how it ended (``stop``, ``length``…)
    response_id: str | None = None  # a chat cell's reply: the id the service gave it

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> ResultRow:
        """Build a row from a mapping of column names (a stored row, a test's dict).

        Raises:
            ValueError: A key that is not a ``results`` column, or a missing required one.
        """
        unknown = set(row) - _FIELD_SET
        if unknown:
            raise ValueError(f"not results columns: {', '.join(sorted(unknown))}")
        try:
            return cls(**row)
        except TypeError as exc:
            raise ValueError(str(exc)) from None

    @property
    def is_error(self) -> bool:
        """True for an infrastructure error (see :func:`is_infra_error`)."""
        return is_infra_error(self.error_kind, self.status)


#: The ``results`` columns, in table order.
RESULT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
_FIELD_SET = frozenset(RESULT_FIELDS)
_VALUES = attrgetter(*RESULT_FIELDS)
#: The fields whose values are numbers (ints, floats or bools).
_NUMBER_FIELDS = tuple(f.name for f in fields(ResultRow)
                       if any(t in str(f.type) for t in ("int", "float", "bool")))
_FLOATS = attrgetter(*(f.name for f in fields(ResultRow) if "float" in str(f.type)))
#: Only these columns hold containers (stored as JSON text); the rest bind as is.
_JSON_POSITIONS = [
    i for i, name in enumerate(RESULT_FIELDS)
    if name in ("input", "tool_calls", "details", "rubric_scores", "attempt_history", "grader_scores")
]
_OUTPUT_POSITION = RESULT_FIELDS.index("output")
_REASONING_POSITION = RESULT_FIELDS.index("reasoning")
_ROW_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, allow_nan=False)  # NaN is no JSON


def row_values(row: ResultRow, *, lenient: bool = False) -> list[Any]:
    """The row's values in column order, containers as sorted-key JSON, ``output`` and
    ``reasoning`` capped.

    With ``lenient``, a container JSON cannot hold (an object of another type, mixed key
    types, nesting too deep for the encoder) is stored as ``{"unencodable": <its repr>}``
    instead of raising: the writer's fallback, so one odd row cannot stop a run.
    """
    values = list(_VALUES(row))
    for i in _JSON_POSITIONS:
        value = values[i]
        if isinstance(value, dict | list | tuple):
            values[i] = _json_column(value) if not lenient else _lenient_json_column(value)
    for position in (_OUTPUT_POSITION, _REASONING_POSITION):  # the thinking is capped as the answer is
        text = values[position]
        if isinstance(text, str) and len(text) > MAX_STORED_OUTPUT_CHARS:
            values[position] = cap_output(text)
    return values


def _json_column(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> str:
    return _ROW_JSON.encode(value) if value else ("{}" if isinstance(value, dict) else "[]")


def _lenient_json_column(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> str:
    try:
        return _json_column(value)
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(value)[:2000]
        except RecursionError:
            text = f"<{type(value).__name__} nested too deeply>"
        return _ROW_JSON.encode({"unencodable": text})


#: The most characters of an output the store keeps (and so every report copies). The
#: matcher has already scored the whole reply (itself at most 8 MiB on the wire, decoded).
MAX_STORED_OUTPUT_CHARS = 1 << 20


def cap_output(text: str) -> str:
    """``text`` cut to :data:`MAX_STORED_OUTPUT_CHARS`, with a marker saying how long it was."""
    if len(text) <= MAX_STORED_OUTPUT_CHARS:
        return text
    return (f"{text[:MAX_STORED_OUTPUT_CHARS]}\n"
            f"[evalhydra: output cut at {MAX_STORED_OUTPUT_CHARS} of {len(text)} characters]")


#: Numbers a SQLite INTEGER holds.
_INT_LOW, _INT_HIGH = -(1 << 63), (1 << 63) - 1
#: Fields holding what a matcher scored (a bad number there is the matcher's error).
_SCORE_FIELDS = ("score", "pass_threshold")
_SCORE_JSON = ("grader_scores", "rubric_scores")


def checked_row(row: ResultRow, *, whole: bool = False) -> ResultRow:
    """``row``, or when a number in it cannot be kept (an integer past SQLite's 64 bits, a NaN or an
    infinity) that cell as an error with those numbers left out: a score is the matcher's error
    (``matcher_error``), any other number came from outside (``invalid_response``).

    Only floats are checked unless ``whole``: integers come capped from their parsers, and one
    past 64 bits that slipped through makes the writer check the rows whole.
    """
    if not whole and _all_finite(_FLOATS(row)) and not (row.grader_scores or row.rubric_scores):
        return row
    bad = [name for name in _NUMBER_FIELDS if not storable(getattr(row, name))]
    bad += [name for name in _SCORE_JSON if getattr(row, name) and not _finite_json(getattr(row, name))]
    if not bad:
        return row
    cleared: dict[str, Any] = {name: None for name in bad}
    scores = [name for name in bad if name in _SCORE_FIELDS or name in _SCORE_JSON]
    kind = "matcher_error" if scores and len(scores) == len(bad) else "invalid_response"
    shown = ", ".join(f"{name}={_shown(getattr(row, name))}" for name in bad)
    reason = (f"the matcher gave a score that is not a finite number ({shown})" if kind == "matcher_error"
              else f"a number past what the store can hold ({shown})")
    return replace(row, **cleared, status="ERROR", passed=False, error_kind=kind, failure_reason=reason)


def _all_finite(values: tuple[Any, ...]) -> bool:
    """Whether no value is a NaN or an infinity (this runs for every cell)."""
    for value in values:  # noqa: SIM110 (a loop: any() over a generator costs more, for every cell)
        if type(value) is float and value - value != 0.0:
            return False
    return True


def storable(value: Any) -> bool:
    """Whether SQLite keeps ``value`` as given: not an integer past 64 bits, a NaN or an infinity."""
    kind = type(value)
    if kind is float:
        return value - value == 0.0  # False for a NaN or an infinity
    if kind is int:
        return _INT_LOW <= value <= _INT_HIGH
    return True


def _finite_json(value: Any) -> bool:
    """Whether every number in a JSON-bound container is finite and fits (walked without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif not storable(item):
            return False
    return True


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, dict | list | tuple) else "a non-finite number"
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} digits)"


#: ``attempts`` table columns, in order.
ATTEMPT_FIELDS = ("cell_key", "run_id", "call", "attempt", "status_code", "error_kind", "latency_ms",
                  "error_message")


#: The last whole second formatted, and the last millisecond's timestamp: ``[(key, text)]``
#: (one tuple each, read and replaced whole, so a thread never pairs one key with another's text).
_SECOND: list[tuple[int, str]] = [(-1, "")]
_MILLISECOND: list[tuple[int, str]] = [(-1, "")]


def now_iso() -> str:
    """UTC timestamp in ISO 8601 with milliseconds and a Z suffix (cheap: a run stores several
    results a millisecond, and the date is formatted once a second)."""
    ms = int(time.time() * 1000)
    last = _MILLISECOND[0]
    if ms == last[0]:
        return last[1]
    second, fraction = divmod(ms, 1000)
    date = _SECOND[0]
    if second != date[0]:
        date = _SECOND[0] = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    text = f"{date[1]}.{fraction:03d}Z"
    _MILLISECOND[0] = (ms, text)
    return text


def verdict_sql(alias: str = "") -> str:
    """SQL naming a ``runs`` row's verdict from its exit code: ``passed`` only when a gate was set
    and passed (``run.fail_under``, ``fail_under_per_eval``, ``fail_under_pass_hat_k``,
    ``require_judge_labels`` or ``min_judge_kappa`` in its config), ``no gate`` for a run that measured
    without one."""
    config = f"{alias}config"
    gated = " or ".join((f"json_extract({config}, '$.run.fail_under') is not null",
                         f"coalesce(json_extract({config}, '$.run.fail_under_per_eval'), '{{}}') != '{{}}'",
                         f"json_extract({config}, '$.run.fail_under_pass_hat_k') is not null",
                         f"json_extract({config}, '$.run.require_judge_labels') is not null",
                         f"json_extract({config}, '$.run.min_judge_kappa') is not null"))
    # CASE, not AND: json_extract of a config that is not JSON must never be evaluated
    passed = (f"case when not json_valid({config}) then 'no gate' when {gated} then 'passed'"
              " else 'no gate' end")
    return (f"case {alias}exit_code when 0 then ({passed}) when 1 then 'gate failed'"
            " when 2 then 'usage error' when 3 then 'could not measure' when 130 then 'interrupted'"
            " else '' end")
