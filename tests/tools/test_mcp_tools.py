"""Issue 51, items 1, 4 and 8: MCP servers in the loop through the official SDK: a real stdio
server written with it (two stateful tools), its tools offered under OpenAI names, results and
errors back to the model, the end state from a state tool, and a server that does not start,
dies, or misbehaves on stdout bounded by the read timeout; the model is the project's mock."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.toolnames import openai_name
from evalhydra.core.values import ChatRequest, ToolSpec
from evalhydra.execute.mcp_tools import McpUnavailable, open_mcp
from evalhydra.execute.toolbox import Toolbox
from evalhydra.execute.toolloop import LoopOutcome, run_loop
from evalhydra.plan.tools import LoopPlan, McpServerPlan, ToolImpl
from evalhydra.services.openai.service import OpenAICompatService
from tests.helpers import mock_call, mock_process

SERVER = str(Path(__file__).with_name("mcp_notes.py"))
ROOT = Path(__file__).resolve().parents[2]
NOTES = McpServerPlan("notes", (sys.executable, SERVER), state_tool="notes.list", read_timeout_s=20)


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with mock_process() as url:
        yield url


async def loop_with(url: str, text: str, *servers: McpServerPlan, extra: tuple[ToolSpec, ...] = (),
                    impls: tuple[ToolImpl, ...] = ()) -> tuple[LoopOutcome, list[str]]:
    mock_call(url, "config", {"tool_wire": None, "fault": None, "latency_ms": 0})
    plan = LoopPlan(tools=impls, mcp=servers)
    service = OpenAICompatService(ServiceConfig(name="m", base_url=url), registry_root=ROOT)
    try:
        async with open_mcp(servers, {t.name for t in extra}, trio.CapacityLimiter(2)) as tools:
            offered = (*extra, *tools.specs)
            outcome = await run_loop(service, ChatRequest(text, model="mock-model", tools=offered), plan,
                                     Toolbox(plan, offered, ROOT, tools))
            return outcome, [t.name for t in tools.specs]
    finally:
        await service.aclose()


@pytest.mark.slow
async def test_a_stdio_servers_tools_run_in_the_loop_with_state(mock_url: str) -> None:
    script = ('Call add_note with {"text": "milk"}. Call add_note with {"text": "eggs"}. '
              "Call notes_list with {}.")
    outcome, offered = await loop_with(mock_url, script, NOTES)
    assert sorted(offered) == ["add_note", "die", "huge", "notes_list", "refuse"]
    assert [(r["name"], r["original_name"], r["result"]) for r in outcome.call_rows] == [
        ("add_note", "notes:add_note", "1 note(s)"), ("add_note", "notes:add_note", "2 note(s)"),
        ("notes_list", "notes:notes.list", "milk\neggs")]
    assert outcome.stop_reason == "model_stopped" and outcome.state == ["milk", "eggs"]


@pytest.mark.slow
async def test_a_fresh_server_per_cell(mock_url: str) -> None:
    first, _ = await loop_with(mock_url, 'Call add_note with {"text": "a"}.', NOTES)
    second, _ = await loop_with(mock_url, 'Call add_note with {"text": "b"}.', NOTES)
    assert first.state == ["a"] and second.state == ["b"]  # the second cell never saw the first's note


@pytest.mark.slow
async def test_errors_go_back_to_the_model_and_filters_and_names_hold(mock_url: str) -> None:
    clash = ToolSpec("add_note", "A Python tool of the same name.", {"type": "object"})
    filtered = McpServerPlan("notes", (sys.executable, SERVER), tools=("add_note", "refuse", "notes.list"),
                             exclude_tools=("notes.list",))
    outcome, offered = await loop_with(
        mock_url, 'Call refuse with {"reason": "no"}. Call notes__add_note with {"text": 5}.', filtered,
        extra=(clash,), impls=(ToolImpl("add_note", replies="python"),))
    assert sorted(offered) == ["notes__add_note", "refuse"]
    assert [r["error_kind"] for r in outcome.call_rows] == ["mcp_error", "schema_mismatch"]
    assert outcome.call_rows[0]["result"].startswith("error: ")


def test_names_become_openai_function_names() -> None:
    assert openai_name("s", "notes.list", set()) == "notes_list"
    assert openai_name("my.server", "go", {"go"}) == "my_server__go"
    long = openai_name("s", "x" * 100, set())
    assert len(long) == 64 and long != openai_name("s", "x" * 99 + "z", set())


@pytest.mark.slow
async def test_a_server_that_does_not_start_or_dies_is_an_infrastructure_error(mock_url: str) -> None:
    missing = McpServerPlan("gone", ("/nonexistent/mcp-server",), read_timeout_s=5)
    with pytest.raises(McpUnavailable, match="did not start"):
        await loop_with(mock_url, "hi", missing)
    with pytest.raises(McpUnavailable):
        await loop_with(mock_url, "Call die with {}.", NOTES)


@pytest.mark.slow
async def test_a_hostile_server_cannot_hang_or_flood_a_cell(mock_url: str) -> None:
    hostile = McpServerPlan("h", (sys.executable, SERVER, "hostile"), read_timeout_s=20)
    plan = LoopPlan(mcp=(hostile,), result_chars=1000)
    service = OpenAICompatService(ServiceConfig(name="m", base_url=mock_url), registry_root=ROOT)
    try:
        with trio.fail_after(60):
            async with open_mcp((hostile,), set(), trio.CapacityLimiter(1)) as tools:
                request = ChatRequest('Call huge with {"size": 3000000}.', model="mock-model",
                                      tools=tuple(tools.specs))
                toolbox = Toolbox(plan, tuple(tools.specs), ROOT, tools)
                outcome = await run_loop(service, request, plan, toolbox)
                assert "starting, noisily" in tools.stderr_tails()["h"]  # stderr kept for the cell
    finally:
        await service.aclose()
    (call,) = outcome.call_rows
    assert call["result_cut"] and len(call["result"]) == 1000 and call["error_kind"] is None


@pytest.mark.slow
async def test_the_sdks_in_memory_client_reaches_the_same_tools() -> None:
    """A unit test's MCP server, in this process through the SDK's in-memory transport."""
    from mcp.client._memory import InMemoryTransport

    from tests.tools import mcp_notes

    mcp_notes.NOTES.clear()
    server = McpServerPlan("notes", ("unused",), state_tool="notes.list")
    async with open_mcp((server,), {"add_note"}, trio.CapacityLimiter(1),
                        connect=lambda plan: InMemoryTransport(mcp_notes.app)) as tools:
        names = sorted(t.name for t in tools.specs)
        assert names == ["die", "huge", "notes__add_note", "notes_list", "refuse"]
        assert await tools.call("notes__add_note", {"text": "tea"}) == ("1 note(s)", None)
        text, kind = await tools.call("refuse", {"reason": "no"})
        assert kind == "mcp_error" and text.startswith("error: ")
        assert await tools.state() == ["tea"]


@pytest.mark.slow
# the SDK's HTTP client (httpx2) leaves response iterators to the garbage collector under trio
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_streamable_http_server_is_reached_by_url(mock_url: str) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = await trio.lowlevel.open_process([sys.executable, SERVER, "http", str(port)])
    try:
        with trio.fail_after(30):
            while True:
                try:
                    await (await trio.open_tcp_stream("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await trio.sleep(0.1)
        plan = McpServerPlan("notes", url=f"http://127.0.0.1:{port}/mcp", state_tool="notes.list")
        outcome, offered = await loop_with(mock_url, 'Call add_note with {"text": "web"}.', plan)
    finally:
        server.terminate()
        await server.wait()
    assert "add_note" in offered and outcome.call_rows[0]["result"] == "1 note(s)"
    assert outcome.state == ["web"]


def _registry(root: Path, scope: str) -> Path:
    from tests.conftest import smoke_eval, write_registry

    lines = "".join(json.dumps({"id": f"c{i}", "input": f'Call add_note with {{"text": "n{i}"}}. '
                                                       "Call notes_list with {}.", "ideal": "x"}) + "\n"
                    for i in range(3))
    spec = smoke_eval("g.notes", "data/g/notes/test.jsonl", matcher={"kind": "no_tool_errors"},
                      loop={"max_turns": 4},
                      mcp=[{"name": "notes", "command": [sys.executable, SERVER], "scope": scope}])
    return write_registry(root, evals={"g/notes.json": spec}, data={"data/g/notes/test.jsonl": lines})


@pytest.mark.slow
@pytest.mark.parametrize("scope", ["cell", "run"])
def test_mcp_sessions_per_cell_or_shared_by_the_run(tmp_path: Path, scope: str) -> None:
    from tests.helpers import query_rows, run_cli

    registry = _registry(tmp_path / "reg", scope)
    done = run_cli(f"registry={registry}", "eval=g.notes", f"store.path={tmp_path / 's.db'}",
                   "run.progress=false", "run.concurrency=1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = [r["result"] for r in query_rows(tmp_path / "s.db", "select result from tool_calls"
                                               " where name = 'notes_list' order by case_id")]
    if scope == "cell":  # each cell's own server: only its own note
        assert listed == ["n0", "n1", "n2"]
    else:  # one server for the run: the notes of the cells before too
        assert listed == ["n0", "n0\nn1", "n0\nn1\nn2"]


@pytest.mark.slow
def test_a_server_that_does_not_start_is_the_cells_stored_error(tmp_path: Path) -> None:
    from tests.conftest import smoke_eval, write_registry
    from tests.helpers import query_rows, run_cli

    spec = smoke_eval(matcher={"kind": "no_tool_errors"},
                      mcp=[{"name": "gone", "command": [str(tmp_path / "no-such-server")]}])
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": spec},
                              data={"data/g/e/test.jsonl": '{"id": "c0", "input": "hi", "ideal": "x"}\n'})
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                   "run.progress=false", cwd=tmp_path)
    assert "Traceback" not in done.stderr
    (row,) = query_rows(tmp_path / "s.db", "select status, error_kind, failure_reason from results")
    assert (row["status"], row["error_kind"]) == ("ERROR", "tool_server_error")
    assert "MCP server 'gone' did not start" in row["failure_reason"]
