"""Issue 59, D16: MCP edge cases. A malformed result is the tool's error and the cell goes on; a
name listed three times is offered once; ``env`` can refer to the environment evalhydra runs in."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

SERVER = str(Path(__file__).with_name("mcp_raw.py"))


def _run(tmp_path: Path, env: dict[str, str], *cases: tuple[str, str]) -> tuple[str, list[tuple[str, ...]]]:
    lines = "".join(json.dumps({"id": case, "input": f"Call {tool} with {{}}. Then reply with exactly done.",
                                "ideal": "done"}) + "\n" for case, tool in cases)
    spec = smoke_eval(loop={"max_turns": 3},
                      mcp=[{"name": "raw", "command": [sys.executable, SERVER],
                            "env": {"FROM_PARENT": "${EVALHYDRA_TEST_PARENT}"}}])
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": spec},
                              data={"data/g/e/test.jsonl": lines})
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                   "run.progress=false", cwd=tmp_path, env=env, timeout=90)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    db = sqlite3.connect(tmp_path / "s.db")
    rows = db.execute("select r.case_id, r.status, coalesce(r.error_kind, ''), coalesce(t.error_kind, 'ok'),"
                      " coalesce(t.result, r.failure_reason) from results r left join tool_calls t"
                      " on t.case_id = r.case_id order by r.case_id").fetchall()
    db.close()
    return done.stdout, rows


@pytest.mark.slow
def test_a_malformed_result_is_the_tools_error_and_env_reaches_the_server(tmp_path: Path) -> None:
    _, rows = _run(tmp_path, {"EVALHYDRA_TEST_PARENT": "from-the-parent"},
                   ("broken", "broken"), ("echo", "echo"), ("env", "env_value"))
    found = {case: rest for case, *rest in rows}
    assert found["broken"][:3] == ["PASS", "", "mcp_error"]  # the cell went on and answered
    assert found["broken"][3].startswith("error: the server's answer is no tool result:")
    assert found["echo"] == ["PASS", "", "ok", "echoed"]
    assert found["env"] == ["PASS", "", "ok", "from-the-parent"]


@pytest.mark.slow
def test_an_env_reference_to_an_unset_variable_names_it(tmp_path: Path) -> None:
    _, rows = _run(tmp_path, {}, ("echo", "echo"))
    ((_, status, kind, _, reason),) = rows
    assert (status, kind) == ("ERROR", "tool_server_error")
    assert "${EVALHYDRA_TEST_PARENT}, which is not set" in reason


@pytest.mark.slow
def test_a_state_tool_answering_json_text_is_matched_as_json(tmp_path: Path) -> None:
    """Issue 60, item 3: a state_tool written as ``-> str`` returning json.dumps(...) is the object."""
    script = "Call echo with {}. Then reply with exactly done."
    line = json.dumps({"id": "c", "ideal": "done", "input": script})
    spec = smoke_eval(loop={"max_turns": 3}, matcher={"kind": "state", "state": {"n": 2}},
                      mcp=[{"name": "raw", "command": [sys.executable, SERVER], "state_tool": "state_json",
                            "env": {"FROM_PARENT": "x"}}])
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": spec},
                              data={"data/g/e/test.jsonl": line + "\n"})
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                   "run.progress=false", cwd=tmp_path, timeout=90)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    db = sqlite3.connect(tmp_path / "s.db")
    (state,) = db.execute("select json_extract(details, '$.trajectory.state') from results").fetchone()
    db.close()
    assert json.loads(state) == {"notes": ["a", "b"], "n": 2}


def test_a_name_listed_three_times_is_offered_once() -> None:
    from types import SimpleNamespace

    from evalhydra.execute.mcp_tools import McpTools, _offer
    from evalhydra.plan.tools import McpServerPlan

    tool = SimpleNamespace(name="echo", description="Echo.", input_schema={"type": "object"})
    tools = McpTools()
    _offer(tools, McpServerPlan("raw", ("x",)), object(), [tool, tool, tool], set())
    assert [spec.name for spec in tools.specs] == ["echo"]
