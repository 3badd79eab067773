"""A cell's tools: each call the model makes run, its outcome turned into the text the model reads.

A call never raises: an unknown tool, arguments that are not a JSON object or fail the tool's
schema, a tool that raises or outlasts its timeout, a canned table without the call, each
goes back to the model as the tool's result (``error: …``) and is recorded with its error kind.
Results are text: strings as they are, bytes decoded (invalid UTF-8 escaped), anything else as
JSON; what the model sees and the store keeps is capped.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from evalhydra.core import strictjson
from evalhydra.core.untrusted_schema import schema_errors, untrusted_validator
from evalhydra.core.usercode import USER_THREADS, describe, passes_through
from evalhydra.core.values import ToolSpec, arguments_or_empty
from evalhydra.execute.mcp_tools import McpTools, McpUnavailable
from evalhydra.plan.tools import LoopPlan, ToolImpl, resolve_target

__all__ = ["ToolOutcome", "Toolbox", "as_text"]

#: Longest a tool class's ``state()`` may take at the end of a cell.
STATE_TIMEOUT_S = 30.0
#: Most characters of a cell's end state (as JSON) kept.
MAX_STATE_CHARS = 1_000_000
#: Most characters of a result's ``repr`` when JSON cannot encode it.
MAX_REPR_CHARS = 100_000
#: Kinds of tool errors (the call's result tells the model what went wrong).
TOOL_ERRORS = ("unknown_tool", "invalid_arguments", "schema_mismatch", "no_canned_reply", "timeout",
               "tool_exception", "mcp_error")


@dataclass(frozen=True)
class ToolOutcome:
    """What one call gave: the text the model reads (capped), whether it was cut, the whole
    text's SHA-256, an error kind (None: the tool answered) and how long it took."""

    text: str
    cut: bool
    sha256: str
    error_kind: str | None
    latency_ms: float
    arguments: Any = None  # the parsed arguments (None when they were not a JSON object)


class Toolbox:
    """The tools of one cell: functions, canned tables, and a tool class made for this cell."""

    def __init__(self, loop: LoopPlan, offered: tuple[ToolSpec, ...], root: Path,
                 mcp: McpTools | None = None, initial_state: Any = None) -> None:
        """Make the cell's tool class (set to ``initial_state`` by its ``set_state``, when it has
        one and a state is given: a τ²-bench task's) and look its functions up."""
        self.loop = loop
        self.mcp = mcp
        self.impls: dict[str, ToolImpl] = {t.name: t for t in loop.tools}
        if mcp is not None:
            self.impls.update({name: ToolImpl(name) for name in mcp.routes})
        self.schemas = {t.name: t.parameters for t in offered}
        self.instance = resolve_target(loop.tool_class, root, "tool_class")() if loop.tool_class else None
        if initial_state is not None and callable(getattr(self.instance, "set_state", None)):
            self.instance.set_state(initial_state)  # type: ignore[union-attr]
        self.functions = {t.name: resolve_target(t.implementation, root, f"tool '{t.name}'")
                          for t in loop.tools if t.implementation}

    def parallel(self, name: str) -> bool:
        """Whether calls of ``name`` may run beside the turn's other parallel calls."""
        impl = self.impls.get(name)
        return impl is not None and impl.parallel

    def original_name(self, name: str) -> str:
        """The name the tool has where it runs (an MCP tool's ``server:name``)."""
        return self.mcp.originals.get(name, name) if self.mcp is not None else name

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        """Run one call; never raises, except :class:`McpUnavailable` when its MCP server is gone."""
        started = time.perf_counter()
        text, kind, parsed = await self._outcome(name, arguments)
        cut = len(text) > self.loop.result_chars
        digest = hashlib.sha256(text.encode()).hexdigest()
        elapsed = (time.perf_counter() - started) * 1000
        return ToolOutcome(text[:self.loop.result_chars], cut, digest, kind, elapsed, parsed)

    async def _outcome(self, name: str, arguments: str) -> tuple[str, str | None, Any]:
        impl = self.impls.get(name)
        if impl is None:
            known = ", ".join(sorted(self.impls))
            return f"error: no tool named {name!r} (tools: {known})", "unknown_tool", None
        try:
            parsed = strictjson.loads_plain(arguments_or_empty(arguments), constants=False)
        except ValueError as exc:
            return f"error: the arguments are not JSON: {exc}", "invalid_arguments", None
        if not isinstance(parsed, dict):
            return "error: the arguments must be a JSON object", "invalid_arguments", None
        problem = _schema_problem(self.schemas.get(name), parsed)
        if problem:
            return f"error: the arguments do not fit the tool's schema: {problem}", "schema_mismatch", parsed
        if impl.replies is not None:
            return (*_canned(impl.replies, parsed), parsed)
        if self.mcp is not None and name in self.mcp.routes:
            return (*await self.mcp.call(name, parsed), parsed)
        try:
            with trio.fail_after(impl.timeout_s):
                value = await self._invoke(impl, parsed)
            return as_text(value), None, parsed
        except trio.TooSlowError:
            return f"error: the tool took longer than {impl.timeout_s:g} s", "timeout", parsed
        except BaseException as exc:  # a tool's own failure (sys.exit too) is the model's to read
            if passes_through(exc):
                raise
            return f"error: {describe(exc)}", "tool_exception", parsed

    async def _invoke(self, impl: ToolImpl, arguments: dict[str, Any]) -> Any:
        target = getattr(self.instance, impl.name) if impl.method else self.functions[impl.name]
        if inspect.iscoroutinefunction(target):
            return await target(**arguments)
        # a blocking tool runs in a user-code thread; past its timeout the cell goes on without it
        return await USER_THREADS.run_sync(lambda: target(**arguments))

    async def final_state(self) -> Any:
        """The end state: the tool class's ``state()`` (in a user-code thread, at most
        :data:`STATE_TIMEOUT_S`), else an MCP server's ``state_tool``; at most
        :data:`MAX_STATE_CHARS` of JSON, else an error saying so."""
        state = None
        if callable(getattr(self.instance, "state", None)):
            with trio.move_on_after(STATE_TIMEOUT_S) as scope:
                state = await USER_THREADS.run_sync(self.state)
            if scope.cancelled_caught:
                return {"error": f"state() took longer than {STATE_TIMEOUT_S:g} s"}
        if state is None and self.mcp is not None:
            try:
                state = await self.mcp.state()
            except McpUnavailable as exc:
                return {"error": str(exc)}
        return _capped_state(state)

    def state(self) -> Any:
        """The tool class's ``state()`` now, as JSON allows (None without a class or a state)."""
        read = getattr(self.instance, "state", None)
        if not callable(read):
            return None
        try:
            return json.loads(json.dumps(read(), default=str))
        except BaseException as exc:  # a broken state() is recorded, not raised
            if passes_through(exc):
                raise
            return {"error": describe(exc)}


def _capped_state(state: Any) -> Any:
    """``state``, or an error naming its size when its JSON is over :data:`MAX_STATE_CHARS`."""
    if state is None or isinstance(state, bool | int | float):
        return state
    size = len(json.dumps(state, ensure_ascii=False, default=str))
    if size > MAX_STATE_CHARS:
        return {"error": f"the end state is {size:,} characters of JSON, over the cap of {MAX_STATE_CHARS:,}"}
    return state


def _schema_problem(schema: Any, arguments: dict[str, Any]) -> str | None:
    if not isinstance(schema, dict) or not schema:
        return None
    import jsonschema  # here, not at the top: the command line starts without it (bench/startup.py)
    from jsonschema.exceptions import best_match

    try:
        validator = untrusted_validator(schema)
    except jsonschema.SchemaError:
        return None  # the offered schema itself is the eval's problem, not the model's
    error = best_match(schema_errors(validator, arguments))
    return error.message if error is not None else None


def _canned(replies: Any, arguments: dict[str, Any]) -> tuple[str, str | None]:
    if not isinstance(replies, dict):
        return as_text(replies), None
    key = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for candidate in (key, "*"):
        if candidate in replies:
            return as_text(replies[candidate]), None
    return f"error: no reply for these arguments ({key})", "no_canned_reply"


def as_text(value: Any) -> str:
    """A tool's result as text: a string as it is, bytes as UTF-8 (invalid bytes escaped), None
    as "", anything else as JSON; lone surrogates escaped."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", "backslashreplace")
    elif isinstance(value, str):
        text = value
    elif value is None:
        text = ""
    else:
        text = _json_text(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _json_text(value: Any) -> str:
    """A result as JSON; one JSON cannot encode (a self-containing dict, an integer too long for
    it, a ``__str__`` that raises) is its ``repr``, or a note saying why it cannot be shown."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except BaseException as exc:  # noqa: BLE001 (user data's own failure, contained below)
        if passes_through(exc):
            raise
        try:
            return repr(value)[:MAX_REPR_CHARS]
        except BaseException as again:  # noqa: BLE001
            if passes_through(again):
                raise
            return f"<a {type(value).__name__} that cannot be shown as text: {describe(exc)}>"
