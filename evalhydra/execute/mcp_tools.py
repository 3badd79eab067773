"""MCP servers as a cell's tools, through the official ``mcp`` SDK (``pip install evalhydra[mcp]``).

Each cell starts its own session with each server the eval names (stdio: the server's process
in a scratch working directory, with only the environment the config names over the SDK's
safe defaults, its stderr captured for the cell; or streamable HTTP at ``url``), lists its
tools (``tools``/``exclude_tools`` filter them) and offers them under OpenAI function names:
characters outside ``[A-Za-z0-9_-]`` become ``_``, a name taken by another tool gets the
server's name as a prefix, and a name past 64 characters is cut and given a hash suffix. Both
names are recorded. Every call waits at most ``read_timeout_s``. A server that does not start,
dies, or whose transport fails is the cell's infrastructure error; a tool that reports an error
(``is_error``) or times out is a result the model reads. The session, and the server's process
group, end with the cell.
"""

from __future__ import annotations

import json
import os
import re
import signal
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from evalhydra.core.toolnames import openai_name
from evalhydra.core.usercode import describe
from evalhydra.core.values import ToolSpec
from evalhydra.plan.tools import McpServerPlan

__all__ = ["McpTools", "McpUnavailable", "SharedServers", "open_mcp"]

#: Of a server's captured stderr, the end kept with the cell.
STDERR_TAIL = 4096


class McpUnavailable(Exception):
    """A server did not start, died, or its transport failed: the cell's infrastructure error."""


@dataclass
class McpTools:
    """The MCP tools of one cell: their offered specs, and where each mapped name goes."""

    specs: list[ToolSpec] = field(default_factory=list)
    #: mapped name -> (its session, its name on the server, the read timeout)
    routes: dict[str, tuple[Any, str, float]] = field(default_factory=dict)
    originals: dict[str, str] = field(default_factory=dict)  # mapped -> "server:original name"
    stderr: dict[str, StderrTail] = field(default_factory=dict)
    groups: set[int] = field(default_factory=set)  # the process groups of this cell's stdio servers
    state_calls: list[tuple[Any, str, float]] = field(default_factory=list)

    async def call(self, mapped: str, arguments: dict[str, Any]) -> tuple[str, str | None]:
        """Call a tool; (the text the model reads, an error kind or None).

        Raises:
            McpUnavailable: The session is gone.
        """
        session, name, timeout = self.routes[mapped]
        try:
            result = await session.call_tool(name, arguments, read_timeout_seconds=timeout)
            text = result_text(result)
        except Exception as exc:  # the SDK's own errors: a timeout is the tool's, a dead session the cell's
            if _timed_out(exc):
                return f"error: the tool took longer than {timeout:g} s", "timeout"
            if not _session_lost(exc):  # the server answered, but not an MCP result: the tool's error
                return f"error: the server's answer is no tool result: {describe(exc)}", "mcp_error"
            where = self.originals[mapped]
            raise McpUnavailable(f"MCP server for {where}: {type(exc).__name__}: {exc}") from exc
        return (f"error: {text}", "mcp_error") if result.is_error else (text, None)

    async def state(self) -> Any:
        """The first ``state_tool``'s answer after the loop, as JSON when it is (None without one)."""
        for session, name, timeout in self.state_calls:
            try:
                result = await session.call_tool(name, {}, read_timeout_seconds=timeout)
            except Exception as exc:
                return {"error": f"{type(exc).__name__}: {exc}"}
            if result.structured_content is not None:
                content = result.structured_content
                # a "-> str" tool's answer comes as {"result": "<text>"}: JSON text is read as JSON
                return _as_json(content["result"]) if set(content) == {"result"} else content
            return _as_json(result_text(result))
        return None

    def joined(self, other: McpTools) -> McpTools:
        """These tools and ``other``'s together (a cell's own servers and the run's shared ones)."""
        return McpTools([*self.specs, *other.specs], {**self.routes, **other.routes},
                        {**self.originals, **other.originals}, {**self.stderr, **other.stderr},
                        self.groups | other.groups, [*self.state_calls, *other.state_calls])

    def stderr_tails(self) -> dict[str, str]:
        """The end of each server's stderr in this cell."""
        return {server: text for server, tail in self.stderr.items() if (text := tail.text())}


#: Errors of a session whose transport is gone (the server died or closed its streams).
_LOST = ("ClosedResourceError", "BrokenResourceError", "EndOfStream", "BrokenPipeError",
         "ConnectionError", "ConnectionResetError", "McpUnavailable")


def _session_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the session itself is gone (then the cell cannot go on), not that one
    answer could not be read."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_session_lost(inner) for inner in exc.exceptions)
    return type(exc).__name__ in _LOST or isinstance(exc, OSError) or "connection closed" in str(exc).lower()


def _timed_out(exc: Exception) -> bool:
    return "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower()


def _as_json(value: Any) -> Any:
    """A state tool's answer: text that is JSON parsed (``'{"n": 1}'`` as the object it spells),
    anything else as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def result_text(result: Any) -> str:
    """An MCP tool result as text: its text blocks joined; without any, its structured content as
    JSON; other blocks (images, audio, resources) as ``[type]`` placeholders."""
    parts, texts = [], 0
    for block in result.content or ():
        kind = getattr(block, "type", "block")
        if kind == "text":
            parts.append(block.text)
            texts += 1
        else:
            parts.append(f"[{kind}]")
    if not texts and result.structured_content is not None:
        parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


@asynccontextmanager
async def open_mcp(servers: tuple[McpServerPlan, ...], taken: set[str], processes: trio.CapacityLimiter,
                   connect: Callable[[McpServerPlan], Any] | None = None) -> AsyncIterator[McpTools]:
    """Start a session with each server for one cell; yield its tools; end them all after.

    Args:
        servers: The eval's MCP servers.
        taken: Names of the cell's other tools (an MCP tool of the same name gets a prefix).
        processes: Bounds the MCP server processes running at once (``loop.max_processes``).
        connect: Another way to reach a server (its read and write streams, as an async context
            manager): the SDK's in-memory transport in unit tests.

    Raises:
        McpUnavailable: A server did not start or list its tools.
    """
    try:
        from mcp import ClientSession
    except ImportError as exc:
        raise McpUnavailable("MCP servers need the mcp package: pip install 'evalhydra[mcp]'") from exc
    tools = McpTools()
    try:
        async with processes, AsyncExitStack() as stack:
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="evalhydra-mcp-")))
            for server in servers:
                transport = connect(server) if connect is not None else _transport(server, scratch, tools)
                session, listed = await _started(stack, server, transport, tools, ClientSession)
                _offer(tools, server, session, listed, taken)
            tools.groups |= _groups_in(scratch)  # ended with the cell, whatever they started
            yield tools
    except BaseExceptionGroup as group:  # the SDK's task groups wrap what ends them
        down = group.subgroup(McpUnavailable)
        if down is None:
            raise
        raise _leaves(down)[0] from group


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    return [leaf for e in group.exceptions
            for leaf in (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])]


async def _started(stack: AsyncExitStack, server: McpServerPlan, transport: Any, tools: McpTools,
                   session_type: Any) -> tuple[Any, list[Any]]:
    """A started, initialised session with ``server`` over ``transport``, and the tools it lists."""
    try:
        read, write = await stack.enter_async_context(transport)
        session = await stack.enter_async_context(
            session_type(read, write, read_timeout_seconds=server.read_timeout_s))
        with trio.fail_after(server.read_timeout_s):
            await session.initialize()
            listed = (await session.list_tools()).tools
    except (Exception, trio.TooSlowError) as exc:
        started = (f" (it ran {' '.join(server.command)} in {server.cwd or 'a scratch folder of the cell'}:"
                   " a path in command is relative to the eval file's folder, python is evalhydra's"
                   " interpreter, and the registry is on its PYTHONPATH)") if server.command else ""
        raise McpUnavailable(f"MCP server {server.name!r} did not start: {type(exc).__name__}: {exc}"
                             f"{_tail(tools, server.name)}{started}") from exc
    return session, listed


def _tail(tools: McpTools, server: str) -> str:
    tail = tools.stderr_tails().get(server, "").strip().splitlines()[-3:]
    return f" (stderr: {' | '.join(tail)})" if tail else ""


def _transport(server: McpServerPlan, scratch: Path, tools: McpTools) -> Any:
    if server.url:
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(server.url)
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    tail = tools.stderr[server.name] = StderrTail()
    env = {**_environment(server), CELL_MARK: str(scratch)}
    if server.python_path:
        env["PYTHONPATH"] = os.pathsep.join([*server.python_path, *filter(None, [env.get("PYTHONPATH")])])
    params = StdioServerParameters(command=server.command[0], args=list(server.command[1:]),
                                   env=env, cwd=server.cwd or scratch)
    return _closing(stdio_client(params, errlog=tail.writer), tail, tools)


#: ``${NAME}`` in a server's ``env`` value: the variable of the environment evalhydra runs in.
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _environment(server: McpServerPlan) -> dict[str, str]:
    """The server's ``env``, each ``${NAME}`` replaced by that variable of evalhydra's environment
    (only the named ones reach the server: its environment is otherwise the SDK's safe default).

    Raises:
        McpUnavailable: A named variable is not set.
    """
    def value(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if found is None:
            raise McpUnavailable(f"MCP server {server.name!r}: env refers to ${{{match.group(1)}}}, which is"
                                 " not set in the environment evalhydra runs in")
        return found

    return {name: _ENV_REF.sub(value, text) for name, text in server.env}


@asynccontextmanager
async def _closing(transport: Any, tail: StderrTail, tools: McpTools) -> AsyncIterator[Any]:
    """The SDK's stdio transport; after it closes, every process left in the server's group ends
    (the SDK kills the group only when the server itself does not exit), and its stderr pipe."""
    try:
        async with transport as streams:
            yield streams
    finally:
        for group in tools.groups:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        tail.close()


class StderrTail:
    """A server's stderr, drained from a pipe by a thread that keeps only its last
    :data:`STDERR_TAIL` bytes: however much a server writes, neither memory nor disk grows."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.writer = os.fdopen(write, "w", encoding="utf-8")  # the child's stderr
        self.written = 0
        self._tail = bytearray()
        self._lock = threading.Lock()
        threading.Thread(target=self._drain, args=(read,), daemon=True, name="evalhydra-mcp-stderr").start()

    def _drain(self, read: int) -> None:
        with os.fdopen(read, "rb", buffering=0) as source:
            while chunk := source.read(65536):
                with self._lock:
                    self.written += len(chunk)
                    self._tail += chunk
                    del self._tail[:-STDERR_TAIL]

    def close(self) -> None:
        """Close this process's end of the pipe (the thread ends when the server's ends close)."""
        with suppress(OSError):
            self.writer.close()

    def text(self) -> str:
        """The end of what the server wrote, as text."""
        with self._lock:
            return bytes(self._tail).decode("utf-8", "backslashreplace")


#: The variable that marks a cell's stdio servers (and all they start) with the cell's scratch folder.
CELL_MARK = "EVALHYDRA_MCP_CELL"


def _groups_in(scratch: Path) -> set[int]:
    """The process groups of the processes marked with ``scratch`` (a cell's stdio servers and
    whatever they started inherit :data:`CELL_MARK`), read from ``/proc`` (an empty set where there
    is none)."""
    found: set[int] = set()
    mark = f"{CELL_MARK}={scratch}".encode() + b"\0"
    for entry in Path("/proc").glob("[0-9]*"):
        with suppress(OSError, ValueError, IndexError):
            if mark in (entry / "environ").read_bytes():
                found.add(int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]))
    found.discard(os.getpgrp())  # never this process's own group
    return found


def _offer(tools: McpTools, server: McpServerPlan, session: Any, listed: list[Any], taken: set[str]) -> None:
    seen: set[str] = set()
    for tool in listed:
        if (server.tools is not None and tool.name not in server.tools) or tool.name in server.exclude_tools:
            continue
        if tool.name in seen:  # a server that lists a name twice offers one tool
            continue
        seen.add(tool.name)
        mapped = openai_name(server.name, tool.name, taken)
        taken.add(mapped)
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object"}
        tools.specs.append(ToolSpec(mapped, tool.description or "", schema))
        tools.routes[mapped] = (session, tool.name, server.read_timeout_s)
        tools.originals[mapped] = f"{server.name}:{tool.name}"
    if server.state_tool:
        tools.state_calls.append((session, server.state_tool, server.read_timeout_s))


class SharedServers:
    """Servers of ``scope: run``: one session each for every cell of the run.

    Each session is held open by a task of the runner's nursery (an MCP session must end in the
    task that began it) until :meth:`close`; cells wait for it to be ready and call through it.
    """

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._closing = trio.Event()
        self._held: dict[tuple[McpServerPlan, frozenset[str]], tuple[trio.Event, list[Any]]] = {}

    async def tools(self, servers: tuple[McpServerPlan, ...], taken: set[str]) -> McpTools:
        """The shared tools of ``servers`` (started on first use; each one process for the run,
        outside the cells' ``max_processes``).

        Raises:
            McpUnavailable: A server did not start.
        """
        out = McpTools()
        for server in servers:
            key = (server, frozenset(taken))
            if key not in self._held:
                self._held[key] = (trio.Event(), [])
                self._nursery.start_soon(self._hold, server, set(taken), *self._held[key])
            ready, box = self._held[key]
            await ready.wait()
            if isinstance(box[0], McpUnavailable):
                raise box[0]
            out = out.joined(box[0])
        return out

    async def _hold(self, server: McpServerPlan, taken: set[str], ready: trio.Event, box: list[Any]) -> None:
        try:
            async with open_mcp((server,), taken, trio.CapacityLimiter(1)) as tools:
                box.append(tools)
                ready.set()
                await self._closing.wait()
        except McpUnavailable as exc:
            if not ready.is_set():
                box.append(exc)
                ready.set()

    def close(self) -> None:
        """End every shared session (their tasks leave the nursery)."""
        self._closing.set()
