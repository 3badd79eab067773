"""A simulated user as it will run: who plays it, its instructions, how it stops, checked.

An eval with a ``user`` node runs each cell as a conversation: a simulated user with a goal
talks to the agent (the run's service, with the eval's tools) over turns until it stops,
transfers, says the request is out of scope, or a limit ends it. The user is a chat service
(``service``, ``model``, ``params``) prompted with ``instructions``, a template over the case's
``user`` fields (τ²-bench's names: ``persona``, ``reason_for_call``, ``known_info``,
``unknown_info``, ``task_instructions``, and any other). ``mock`` sets the errors the built-in
mock's scripted user makes on purpose (see :mod:`evalhydra.services.mock.simulated_user`).
``tool_class`` gives the user tools of its own (τ²-bench's dual control: the user acts on its own
device), a class made once per cell as the agent's is; only the user sees them.

The simulator's identity (:attr:`UserPlan.identity`) joins every cell's key: a changed simulator
is another measurement, never a stored answer reused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.core.values import ToolSpec
from evalhydra.plan.tools import LoopPlan, class_tools, resolve_target

__all__ = ["CONVERSATION_MAX_TURNS", "DEFAULT_INSTRUCTIONS", "ERROR_KINDS", "STOP_SIGNALS", "UserPlan",
           "conversation_loop", "tau2_classes", "user_plan"]

#: τ²-bench's signals: the user is done, asks for a human, or the request is out of scope.
STOP_SIGNALS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
#: The mock's scripted user's deliberate errors (and the kinds an audit label names).
ERROR_KINDS = ("premature_stop", "goal_drift", "leaked_answer", "contradicted_instructions")
#: What the agent says first when the case gives no opening user message (τ²-bench's greeting).
DEFAULT_GREETING = "Hi! How can I help you today?"
#: The user's instructions when the eval gives none: τ²-bench's user prompt, shortened.
DEFAULT_INSTRUCTIONS = """\
You are playing a user who contacts a customer-service agent. Stay in character: write only what \
the user says, one message at a time, in plain words. Do not invent information you were not \
given; if asked for something you do not know, say so.

{{persona}}

Why you are calling: {{reason_for_call}}
What you know: {{known_info}}
What you do not know: {{unknown_info}}
Your instructions: {{task_instructions}}{{instructions}}

When your goal is met, write {{stop}} alone. If you are transferred to a human agent, write \
{{transfer}}. If the agent cannot help with this kind of request, write {{out_of_scope}}."""
#: Fields of the default instructions a case may leave out (they read as empty).
OPTIONAL_FIELDS = ("persona", "reason_for_call", "known_info", "unknown_info", "task_instructions",
                   "instructions", "domain")
#: The agent's requests over a whole conversation unless ``loop.max_turns`` says otherwise.
CONVERSATION_MAX_TURNS = 50
_KEYS = ("service", "model", "instructions", "stop_signals", "max_turns", "greeting", "params", "mock",
         "tool_class")


@dataclass(frozen=True)
class MockErrors:
    """The built-in mock user's deliberate errors: each cell errs with chance ``rate``, its kind
    drawn from ``kinds`` (both by a hash of the cell and ``seed``, so a rerun errs alike)."""

    rate: float = 0.0
    kinds: tuple[str, ...] = ("premature_stop",)
    seed: int = 0


@dataclass(frozen=True)
class UserPlan:
    """An eval's simulated user."""

    service: str | None = None  # None: the run's own service
    model: str | None = None  # None: that service's model
    instructions: str = DEFAULT_INSTRUCTIONS
    stop_signals: tuple[str, ...] = STOP_SIGNALS  # stop, transfer, out of scope (the first is "stop")
    max_turns: int = 10  # the user's messages at most
    greeting: str = DEFAULT_GREETING
    params: dict[str, Any] = field(default_factory=dict)  # sampling parameters of the user's requests
    mock: MockErrors = field(default_factory=MockErrors)
    tool_class: str | None = None  # the user's own tools (module:Class), made once per cell
    tools: tuple[ToolSpec, ...] = ()  # what that class offers the user

    @property
    def identity(self) -> dict[str, Any]:
        """What makes this simulator this simulator: its instructions' digest, service, model,
        sampling, signals, limits and the mock's errors (stored with every cell)."""
        text = self.instructions.encode("utf-8", "surrogatepass")
        return {"instructions_sha256": hashlib.sha256(text).hexdigest()[:16], "service": self.service,
                "model": self.model, "params": self.params, "stop_signals": list(self.stop_signals),
                "max_turns": self.max_turns, "greeting": self.greeting, "tool_class": self.tool_class,
                "mock": {"rate": self.mock.rate, "kinds": list(self.mock.kinds), "seed": self.mock.seed}}

    @property
    def digest(self) -> str:
        """A short hash of :attr:`identity`."""
        text = json.dumps(self.identity, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def user_plan(spec: Any, where: str, root: Path | None = None) -> UserPlan | None:
    """The eval's ``user`` node, checked (None when the eval has none).

    Raises:
        EvalHydraError: A key is unknown or a value is out of range, naming the key and the fix.
    """
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise EvalHydraError(f"{where}: user must be an object {{service, model, instructions, …}}.")
    unknown = sorted(set(spec) - set(_KEYS))
    if unknown:
        raise EvalHydraError(f"{where}: user.{unknown[0]} is not a simulated-user setting.",
                             did_you_mean(unknown[0], list(_KEYS)))
    turns = spec.get("max_turns", 10)
    if isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= 1000:
        raise EvalHydraError(f"{where}: user.max_turns={turns!r}: must be a whole number in 1..1000.")
    tool_class = _name(spec, "tool_class", where)
    tools = tuple(class_tools(resolve_target(tool_class, root or Path("."), f"{where}: user.tool_class"),
                              f"{where}: user.tool_class")) if tool_class else ()
    return UserPlan(service=_name(spec, "service", where), model=_name(spec, "model", where),
                    tool_class=tool_class, tools=tools,
                    instructions=_text(spec, "instructions", DEFAULT_INSTRUCTIONS, where),
                    stop_signals=_signals(spec.get("stop_signals"), where), max_turns=turns,
                    greeting=_text(spec, "greeting", DEFAULT_GREETING, where),
                    params=_params(spec.get("params"), where), mock=_mock(spec.get("mock"), where))


def tau2_classes(spec: dict[str, Any]) -> dict[str, str]:
    """The tool classes a ``tau2`` matcher replays, from the eval: its ``tool_class`` (the agent's
    domain) and its user's (``user_tool_class``)."""
    found = {"tool_class": spec["tool_class"]} if spec.get("tool_class") else {}
    user = spec.get("user")
    if isinstance(user, dict) and isinstance(user.get("tool_class"), str):
        found["user_tool_class"] = user["tool_class"]
    return found


def conversation_loop(loop: LoopPlan | None, limits: dict[str, Any]) -> LoopPlan:
    """The agent's loop in a conversation: the eval's tools (none: it only talks), with
    :data:`CONVERSATION_MAX_TURNS` requests unless the eval's ``loop`` sets ``max_turns``."""
    if loop is None:
        return LoopPlan(max_turns=CONVERSATION_MAX_TURNS)
    return loop if "max_turns" in limits else replace(loop, max_turns=CONVERSATION_MAX_TURNS)


def _name(spec: dict[str, Any], key: str, where: str) -> str | None:
    value = spec.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise EvalHydraError(f"{where}: user.{key}={value!r}: must be a name (or left out).")
    return value.strip() if isinstance(value, str) else None


def _text(spec: dict[str, Any], key: str, default: str, where: str) -> str:
    value = spec.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise EvalHydraError(f"{where}: user.{key} must be non-empty text.")
    return value


def _signals(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return STOP_SIGNALS
    if not isinstance(value, list) or not value or not all(isinstance(s, str) and s.strip() for s in value):
        raise EvalHydraError(f"{where}: user.stop_signals must be a non-empty list of texts "
                             "(stop, then transfer and out of scope if wanted).",
                             f"The default is {list(STOP_SIGNALS)}.")
    return tuple(value)


def _params(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise EvalHydraError(f"{where}: user.params must be a mapping of request parameters "
                             "(temperature: 0.0).")
    return dict(value)


def _mock(value: Any, where: str) -> MockErrors:
    if value is None:
        return MockErrors()
    if not isinstance(value, dict) or set(value) - {"error_rate", "error_kinds", "seed"}:
        extra = sorted(set(value) - {"error_rate", "error_kinds", "seed"}) if isinstance(value, dict) else []
        raise EvalHydraError(f"{where}: user.mock takes error_rate, error_kinds and seed"
                             + (f", not {extra[0]}." if extra else "."),
                             did_you_mean(extra[0], ["error_rate", "error_kinds", "seed"]) if extra else None)
    rate = value.get("error_rate", 0.0)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise EvalHydraError(f"{where}: user.mock.error_rate={rate!r}: must be a chance in [0, 1].")
    kinds = value.get("error_kinds", ["premature_stop"])
    if not isinstance(kinds, list) or not kinds:
        raise EvalHydraError(f"{where}: user.mock.error_kinds must be a non-empty list of "
                             f"{', '.join(ERROR_KINDS)}.")
    for kind in kinds:
        if kind not in ERROR_KINDS:
            raise EvalHydraError(f"{where}: user.mock.error_kinds: {kind!r} is not an error kind.",
                                 did_you_mean(str(kind), list(ERROR_KINDS)))
    seed = value.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise EvalHydraError(f"{where}: user.mock.seed={seed!r}: must be a whole number.")
    return MockErrors(float(rate), tuple(kinds), seed)
