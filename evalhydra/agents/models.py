"""Value objects of agent-CLI evals: validation results, traces, trial results.

They mirror zrb-llm-evaluator's models so a seed ``validator.py`` ports by
changing its imports only, and :meth:`TrialResult.to_dict` gives the seed's
``results.json`` entry.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evalhydra.core.values import STATUSES, VALIDATION_STATUSES

__all__ = [
    "DEFAULT_CLI",
    "MIN_TIMEOUT_S",
    "TERMINAL_STATUSES",
    "ToolCallRecord",
    "TrialResult",
    "TrialTrace",
    "ValidationCheck",
    "ValidationResult",
    "ValidatorProtocol",
]

#: The program each built-in template runs when ``cli_name`` is not set.
DEFAULT_CLI = {"zrb": "zrb", "claude-code": "claude", "opencode": "opencode"}
#: zrb's least trial timeout (seconds).
MIN_TIMEOUT_S = 30.0
#: A cell with one of these statuses is complete (all five are terminal).
TERMINAL_STATUSES = frozenset(STATUSES)


@dataclass(frozen=True, slots=True)
class ValidationCheck:
    """One named check inside a :class:`ValidationResult`."""

    name: str
    passed: bool
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return ``{name, passed, message}``."""
        return {"name": self.name, "passed": self.passed, "message": self.message}

    def model_dump(self) -> dict[str, Any]:
        """zrb's (pydantic) spelling of :meth:`to_dict`."""
        return self.to_dict()


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """A validator's verdict.

    Args:
        status: ``EXCELLENT``, ``PASS`` or ``FAIL``.
        score: Normalised score in [0, 1].
        details: Per-check breakdown.

    Raises:
        ValueError: If the status or score is out of range.
    """

    status: str
    score: float
    details: list[ValidationCheck] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in VALIDATION_STATUSES:
            raise ValueError(
                f"ValidationResult.status must be one of {', '.join(VALIDATION_STATUSES)}, "
                f"got {self.status!r}"
            )
        if not 0.0 <= float(self.score) <= 1.0:
            raise ValueError(f"ValidationResult.score must be in [0, 1], got {self.score!r}")

    def to_dict(self) -> dict[str, Any]:
        """Return the seed's ``verification_result`` object."""
        return {
            "status": self.status,
            "score": float(self.score),
            "details": [check.to_dict() for check in self.details],
        }

    def model_dump(self) -> dict[str, Any]:
        """zrb's (pydantic) spelling of :meth:`to_dict`."""
        return self.to_dict()

    @classmethod
    def coerce(cls, value: Any) -> ValidationResult:
        """Accept a ValidationResult, a dict, or any object with the same attributes.

        Validators written against the seed's pydantic models return objects
        with ``status``/``score``/``details`` attributes; those are accepted too.

        Raises:
            TypeError: If ``value`` has no ``status`` and ``score``.
            ValueError: If a value is out of range.
        """
        if isinstance(value, cls):
            return value
        get = _getter(value)
        status, score = get("status"), get("score")
        if status is None or score is None:
            raise TypeError(f"validate() must return a ValidationResult, got {type(value).__name__}")
        checks = [_coerce_check(check) for check in (get("details") or [])]
        return cls(status=str(status), score=float(score), details=checks)


def _getter(obj: Any) -> Callable[[str], Any]:
    """Read a field from a mapping or an attribute from an object (None when absent)."""
    if isinstance(obj, Mapping):
        return obj.get
    return lambda name: getattr(obj, name, None)


def _coerce_check(value: Any) -> ValidationCheck:
    if isinstance(value, ValidationCheck):
        return value
    get = _getter(value)
    return ValidationCheck(
        name=str(get("name")), passed=bool(get("passed")), message=str(get("message") or "")
    )


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool invocation from the session history; ``args`` is always a dict."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TrialTrace:
    """What the agent did, parsed from its session history (empty when unknown).

    Attributes:
        tool_calls: Every tool invocation, in order.
        tool_names: Just the names, in order.
        assistant_text: Assistant text chunks joined with ``\\n``.
        turn_count: Number of assistant turns.
    """

    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    tool_names: list[str] = field(default_factory=list)
    assistant_text: str = ""
    turn_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "tool_calls": [{"name": c.name, "args": c.args} for c in self.tool_calls],
            "tool_names": list(self.tool_names),
            "assistant_text": self.assistant_text,
            "turn_count": self.turn_count,
        }

    def model_dump(self) -> dict[str, Any]:
        """zrb's (pydantic) spelling of :meth:`to_dict`."""
        return self.to_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TrialTrace:
        """Rebuild a trace stored with :meth:`to_dict` (None gives an empty trace)."""
        if not data:
            return cls()
        calls = [ToolCallRecord(c["name"], dict(c.get("args") or {})) for c in data["tool_calls"]]
        return cls(
            tool_calls=calls,
            tool_names=[c.name for c in calls],
            assistant_text=str(data.get("assistant_text", "")),
            turn_count=int(data.get("turn_count", 0)),
        )


@runtime_checkable
class ValidatorProtocol(Protocol):
    """What a case's module-level ``validator`` object must implement.

    ``output_dir`` is the trial's working directory (the agent's cwd),
    ``log_content`` the agent's combined stdout/stderr, and ``trace`` the
    parsed session history.
    """

    def validate(
        self, output_dir: Path, log_content: str, trace: TrialTrace | None = None
    ) -> ValidationResult:
        """Judge one trial."""
        ...


#: results.json keys, in the seed's order.
_SEED_KEYS = (
    "id",
    "model",
    "test_case",
    "trial_index",
    "status",
    "duration",
    "exit_code",
    "log_path",
    "stdout_log_path",
    "verification_result",
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "tool_calls",
    "tool_call_count",
)


@dataclass(slots=True)
class TrialResult:
    """The outcome of one (model, case, trial) cell.

    The first sixteen fields are the seed's; ``cost_usd``, ``trial_dir`` and
    ``trace`` are evalhydra's additions (see :meth:`to_dict`).
    """

    model: str
    test_case: str
    trial_index: int
    status: str
    duration: float
    exit_code: int
    log_path: str
    stdout_log_path: str = ""
    verification_result: dict[str, Any] | None = None
    total_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    tool_calls: list[str] = field(default_factory=list)
    tool_call_count: int = 0
    cost_usd: float = 0.0
    trial_dir: str = ""
    trace: TrialTrace = field(default_factory=TrialTrace)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))  # dashed, as zrb writes it

    def to_dict(self, *, extended: bool = False) -> dict[str, Any]:
        """Return the seed's ``results.json`` entry.

        Args:
            extended: Also include ``cost_usd``, ``trial_dir`` and ``trace``.
        """
        row = {key: getattr(self, key) for key in _SEED_KEYS}
        row["tool_calls"] = list(self.tool_calls)
        if extended:
            row.update(cost_usd=self.cost_usd, trial_dir=self.trial_dir, trace=self.trace.to_dict())
        return row

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialResult:
        """Rebuild a result from :meth:`to_dict` output (either form)."""
        kwargs = {key: data[key] for key in _SEED_KEYS if key in data}
        kwargs["tool_calls"] = list(data.get("tool_calls") or [])
        for key in ("cost_usd", "trial_dir"):
            if key in data:
                kwargs[key] = data[key]
        kwargs["trace"] = TrialTrace.from_dict(data.get("trace"))
        return cls(**kwargs)
