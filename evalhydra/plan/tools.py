"""An eval's tool loop as it will run: which tools run and how, and the loop's limits, checked.

An eval runs as a tool loop when a tool has an ``implementation`` (a Python function) or
``replies`` (a canned table), or when it names a ``tool_class`` (a class made once per cell,
its public methods the tools, its ``state()`` kept when the cell ends). A class's methods are
offered with a JSON schema made from their signatures and the first line of their docstrings.
"""

from __future__ import annotations

import inspect
import sys
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.core.values import ToolSpec
from evalhydra.matchers.custom import importable_from, locate

__all__ = ["LoopPlan", "McpServerPlan", "ToolImpl", "class_tools", "function_schema", "loop_plan",
           "resolve_target"]

#: JSON schema types of annotations.
_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
                               dict: "object"}
#: What ``tool_choice`` may be besides ``{"type": "function", "function": {"name": …}}``.
TOOL_CHOICES = ("none", "auto", "required")


@dataclass(frozen=True)
class ToolImpl:
    """How one offered tool runs: a function, a canned table, or a method of the tool class."""

    name: str
    implementation: str | None = None
    replies: Any = None
    parallel: bool = False
    timeout_s: float = 30.0
    method: bool = False  # a method of the eval's tool_class


@dataclass(frozen=True)
class McpServerPlan:
    """An MCP server a tool loop's cells talk to: a stdio ``command`` (with only ``env`` over the
    SDK's safe defaults) or a streamable-HTTP ``url``; ``tools``/``exclude_tools`` filter what it
    offers; ``state_tool`` is called after the loop for the end state."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    state_tool: str | None = None
    read_timeout_s: float = 30.0
    scope: str = "cell"  # cell: a session per cell; run: one session for every cell (stateless servers)
    cwd: str | None = None  # where a stdio server starts (default: a scratch folder of the cell's)
    python_path: tuple[str, ...] = ()  # put first on its PYTHONPATH: the eval's folder and the registry


@dataclass(frozen=True)
class LoopPlan:
    """A tool loop's tools, limits and choices (the eval's ``loop`` node sets the limits)."""

    tools: tuple[ToolImpl, ...] = ()
    tool_class: str | None = None
    max_turns: int = 10
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    cell_timeout_s: float | None = None
    submit_tool: str | None = None  # a call to it ends the loop; its arguments are the answer
    tool_choice: Any = None  # none | auto | required | a tool's name: sent as configured
    parallel_tool_calls: bool | None = None
    strict: bool | None = None  # sent on every offered function
    max_concurrency: int = 4  # tool calls of one cell running at once (parallel tools)
    result_chars: int = 16_000  # of a tool result, what the model sees and the store keeps
    mcp: tuple[McpServerPlan, ...] = ()
    max_processes: int = 4  # MCP server processes of the run at once (one set per running cell)


_LIMITS = {f.name for f in fields(LoopPlan)} - {"tools", "tool_class", "mcp"}
_MCP_KEYS = {f.name for f in fields(McpServerPlan)}


def resolve_target(path: str, root: Path, where: str) -> Any:
    """The object at ``pkg.module:name`` (or a dotted path), importable from the registry root.

    Raises:
        EvalHydraError: It cannot be imported.
    """
    importable_from(root)
    try:
        return locate(path.replace(":", "."))
    except (ImportError, AttributeError) as exc:
        raise EvalHydraError(f"{where}: {path!r} cannot be imported: {exc}.",
                             "Give pkg.module:name, importable from the registry root.") from None


def class_tools(cls: Any, where: str) -> list[ToolSpec]:
    """The tools a tool class offers: its public methods (not ``state``, ``set_state`` or the
    ``assert_*`` methods a τ²-bench task's environment assertions call), each with a schema."""
    if not inspect.isclass(cls):
        raise EvalHydraError(f"{where}: tool_class must name a class, not {type(cls).__name__}.")
    specs = []
    for name, method in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith(("_", "assert_")) or name in ("state", "set_state"):
            continue
        doc = (inspect.getdoc(method) or "").split("\n\n", 1)[0].replace("\n", " ")
        specs.append(ToolSpec(name, doc, function_schema(method, f"{where}: {cls.__name__}.{name}")))
    if not specs:
        raise EvalHydraError(f"{where}: tool_class {cls.__name__} has no public method to offer.")
    return specs


def function_schema(function: Any, where: str) -> dict[str, Any]:
    """A JSON schema of a function's parameters (after ``self``), from its annotations."""
    hints = typing.get_type_hints(function)
    properties: dict[str, Any] = {}
    required = []
    for index, (name, parameter) in enumerate(inspect.signature(function).parameters.items()):
        if index == 0 and name == "self":
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise EvalHydraError(f"{where}: *args and **kwargs cannot be offered as tool parameters.")
        hint = hints.get(name, str)
        origin = typing.get_origin(hint) or hint
        properties[name] = {"type": _JSON_TYPES.get(origin, "string")}
        if parameter.default is parameter.empty:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def loop_plan(spec: dict[str, Any], root: Path, where: str) -> tuple[LoopPlan | None, list[ToolSpec]]:
    """The eval's tool loop (None when no tool runs) and the tools its class adds."""
    tools = [_impl(t, f"{where}: tool '{t.get('name')}'") for t in spec.get("tools") or []
             if t.get("implementation") or t.get("replies") is not None]
    for impl in tools:  # imported now: a module that cannot load refuses the plan, not every cell
        if impl.implementation and not callable(resolve_target(impl.implementation, root,
                                                               f"{where}: tool '{impl.name}'")):
            raise EvalHydraError(f"{where}: tool '{impl.name}': {impl.implementation!r} is not callable.",
                                 "Give pkg.module:function, importable from the registry root.")
    cls_path = spec.get("tool_class")
    extra: list[ToolSpec] = []
    if cls_path:
        cls = resolve_target(str(cls_path), root, f"{where}: tool_class")
        extra = class_tools(cls, f"{where}: tool_class")
        tools += [ToolImpl(t.name, method=True) for t in extra]
    base = Path(spec["base_dir"]) if spec.get("base_dir") else root
    servers = tuple(_mcp_server(entry, f"{where}: mcp[{i}]", base, root)
                    for i, entry in enumerate(spec.get("mcp") or []))
    if not tools and not servers:
        if spec.get("loop"):
            raise EvalHydraError(f"{where}: loop is set, but no tool runs.",
                                 "Give a tool an implementation (pkg.module:function) or replies, "
                                 "or set tool_class.")
        return None, extra
    limits = dict(spec.get("loop") or {})
    unknown = sorted(set(limits) - _LIMITS)
    if unknown:
        raise EvalHydraError(f"{where}: loop.{unknown[0]} is not a loop setting.",
                             did_you_mean(unknown[0], sorted(_LIMITS)))
    plan = LoopPlan(tools=tuple(tools), tool_class=str(cls_path) if cls_path else None, mcp=servers, **limits)
    _check(plan, {t.name for t in tools} | {t["name"] for t in spec.get("tools") or []}, where)
    return plan, extra


def _mcp_server(entry: Any, where: str, base: Path, root: Path) -> McpServerPlan:
    """One ``mcp`` entry, checked: a name, and a command (a list) or a url. A stdio command is
    placed as :func:`placed_command` says; ``cwd`` is relative to the eval file's folder."""
    if not isinstance(entry, dict):
        raise EvalHydraError(f"{where}: must be an object {{name, command | url, env, tools, …}}.")
    unknown = sorted(set(entry) - _MCP_KEYS)
    if unknown:
        raise EvalHydraError(f"{where}: {unknown[0]} is not an MCP server setting.",
                             did_you_mean(unknown[0], sorted(_MCP_KEYS)))
    command, url = entry.get("command"), entry.get("url")
    if not isinstance(entry.get("name"), str) or not entry["name"].strip():
        raise EvalHydraError(f"{where}: name the server (name: notes).")
    if (command is None) == (url is None):
        raise EvalHydraError(f"{where}: give command (a list: [python, server.py]) or url, one of them.")
    if command is not None and (not isinstance(command, list) or not command
                                or not all(isinstance(c, str) for c in command)):
        raise EvalHydraError(f"{where}: command must be a list of strings, e.g. [python, -m, my_server].")
    env = entry.get("env") or {}
    if not isinstance(env, dict):
        raise EvalHydraError(f"{where}: env must be a mapping of NAME: value.")
    timeout = entry.get("read_timeout_s", 30.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise EvalHydraError(f"{where}: read_timeout_s={timeout!r}: must be a positive number of seconds.")
    listed = entry.get("tools")
    scope = entry.get("scope", "cell")
    if scope not in ("cell", "run"):
        raise EvalHydraError(f"{where}: scope={scope!r}: cell (a session per cell, the default) or run (one"
                             " session for every cell: stateless servers only).")
    if scope == "run" and entry.get("state_tool"):
        raise EvalHydraError(f"{where}: a state_tool needs scope: cell (a shared server's state is every"
                             " cell's).")
    return McpServerPlan(entry["name"].strip(), placed_command(command or [], (base, root)), url,
                         tuple(sorted((str(k), str(v)) for k, v in env.items())),
                         tuple(listed) if listed is not None else None,
                         tuple(entry.get("exclude_tools") or ()), entry.get("state_tool"), float(timeout),
                         scope, _server_cwd(entry.get("cwd"), base, where),
                         tuple(dict.fromkeys([str(base.resolve()), str(root.resolve())])) if command else ())


def placed_command(command: list[str], folders: tuple[Path, ...]) -> tuple[str, ...]:
    """A stdio server's command as it runs: ``python`` (or ``python3``) as its first word is the
    interpreter running evalhydra (the one with the mcp package), and a word naming a file in the
    eval file's folder or else the registry root (``notes_server.py``, ``servers/notes.py``) its
    absolute path, so a registry runs the same from any folder."""
    placed = []
    for index, word in enumerate(command):
        found = [f / word for f in folders if not word.startswith("-") and not Path(word).is_absolute()
                 and (f / word).is_file()]
        if index == 0 and word in ("python", "python3"):
            placed.append(sys.executable)
        elif found:
            placed.append(str(found[0].resolve()))
        else:
            placed.append(word)
    return tuple(placed)


def _server_cwd(cwd: Any, base: Path, where: str) -> str | None:
    if cwd is None:
        return None
    if not isinstance(cwd, str) or not (base / cwd).is_dir():
        raise EvalHydraError(f"{where}: cwd={cwd!r} is no folder (relative to {base}).",
                             "Give a folder relative to the eval file's folder, or leave cwd out.")
    return str((base / cwd).resolve())


def _impl(tool: dict[str, Any], where: str) -> ToolImpl:
    timeout = tool.get("timeout_s", 30.0)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= 3600:
        raise EvalHydraError(f"{where}: timeout_s={timeout!r}: must be a number of seconds in (0, 3600].")
    return ToolImpl(str(tool["name"]), tool.get("implementation"), tool.get("replies"),
                    bool(tool.get("parallel", False)), float(timeout))


def _check(plan: LoopPlan, names: set[str], where: str) -> None:
    counts = {"max_turns": plan.max_turns, "max_concurrency": plan.max_concurrency,
              "result_chars": plan.result_chars, "max_tokens": plan.max_tokens,
              "max_processes": plan.max_processes}
    for key, value in counts.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise EvalHydraError(f"{where}: loop.{key}={value!r}: must be a whole number of at least 1.")
    for key, number in (("max_cost_usd", plan.max_cost_usd), ("cell_timeout_s", plan.cell_timeout_s)):
        if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))
                                   or not number > 0):
            raise EvalHydraError(f"{where}: loop.{key}={number!r}: must be a positive number.")
    if plan.submit_tool is not None and plan.submit_tool not in names and not plan.mcp:
        raise EvalHydraError(f"{where}: loop.submit_tool={plan.submit_tool!r} is not an offered tool.",
                             did_you_mean(str(plan.submit_tool), sorted(names)))
    choice = plan.tool_choice
    if choice is not None and choice not in TOOL_CHOICES and choice not in names and not plan.mcp:
        raise EvalHydraError(f"{where}: loop.tool_choice={choice!r}: none, auto, required or a tool's name.",
                             did_you_mean(str(choice), [*TOOL_CHOICES, *sorted(names)]))
