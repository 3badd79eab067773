"""Issue 51: the order-desk example end to end, offline, as a user runs it: the loop against the
built-in mock, the Python tool class, the trajectory in SQL, a rerun that sends nothing, and batch
mode refused with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import query_rows, run_cli


@pytest.mark.slow
def test_the_order_desk_runs_offline_and_its_path_is_in_sql(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    args = ["eval=tools.order_desk", f"store.path={store}", "run.progress=false"]
    first = run_cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    rows = query_rows(store, "select case_id, passed, json_extract(details, '$.trajectory.stop_reason')"
                             " as stop from results order by case_id")
    assert rows == [{"case_id": "broken-7", "passed": 1, "stop": "model_stopped"},
                    {"case_id": "broken-9", "passed": 1, "stop": "model_stopped"}]
    calls = query_rows(store, "select case_id, turn, name, result, error_kind from tool_calls"
                              " order by case_id, turn")
    assert [(c["case_id"], c["name"]) for c in calls] == [
        ("broken-7", "lookup_order"), ("broken-7", "refund"),
        ("broken-9", "lookup_order"), ("broken-9", "refund")]
    assert calls[1]["result"] == '{"refunded": 7, "reason": "damaged"}' and calls[1]["error_kind"] is None
    turns = query_rows(store, "select count(*) as n, sum(prompt_tokens) > 0 as counted from turns")
    assert turns == [{"n": 6, "counted": 1}]
    attempts = query_rows(store, "select call from attempts order by call")
    assert {a["call"] for a in attempts} == {"turn1", "turn2", "turn3"}
    again = run_cli(*args, cwd=tmp_path)
    assert again.returncode == 0 and "0 run now, 2 resumed" in again.stdout + again.stderr


@pytest.mark.slow
def test_batch_mode_with_a_tool_loop_is_refused(tmp_path: Path) -> None:
    done = run_cli("eval=tools.order_desk", "service.batch.enabled=true", f"store.path={tmp_path / 's.db'}",
                   "run.progress=false", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "tool loop" in line and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_viewer_shows_a_tool_loops_conversation(tmp_path: Path) -> None:
    import httpx

    from tests.viewer.test_viewer import base_of, start_viewer, stop

    store = tmp_path / "s.db"
    done = run_cli("eval=tools.order_desk", f"store.path={store}", "run.progress=false", cwd=tmp_path)
    assert done.returncode == 0
    (run,) = [r["run_id"] for r in query_rows(store, "select run_id from runs")]
    proc, url = start_viewer(store)
    try:
        with httpx.Client(base_url=base_of(url), follow_redirects=True) as client:
            client.get(url)
            params = {"eval": "tools.order_desk", "case": "broken-7"}
            page = client.get(f"/runs/{run}/case", params=params).text
    finally:
        stop(proc)
    conversation = page.split('class="conversation"', 1)[1].split("</details>", 1)[0]
    assert "3 turn(s), 2 tool call(s), stopped: model_stopped" in conversation
    assert conversation.count('class="turn role-tool"') == 2 and "lookup_order" in conversation
    assert "&#34;refund_count&#34;: 1" in conversation or '"refund_count": 1' in conversation  # the end state


@pytest.mark.slow
def test_a_second_run_replays_every_turn_from_the_response_cache(tmp_path: Path) -> None:
    """The cache keys each request on the whole conversation: the same loop, run again into another
    store, answers every turn from the cache."""
    cache = f"cache.path={tmp_path / 'cache.db'}"
    for name in ("a", "b"):
        done = run_cli("eval=tools.order_desk", f"store.path={tmp_path / name}.db", "cache.enabled=true",
                       cache, "run.progress=false", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    sql = ("select json_extract(t.value, '$.cached') as cached from results r,"
           " json_each(json_extract(r.details, '$.trajectory.turns')) t")
    assert [r["cached"] for r in query_rows(tmp_path / "a.db", sql)] == [0] * 6
    assert [r["cached"] for r in query_rows(tmp_path / "b.db", sql)] == [1] * 6


@pytest.mark.slow
def test_a_secret_a_tool_returns_is_masked_in_the_stored_trajectory(tmp_path: Path) -> None:
    """Secrets never persist: a tool that reads the service's key from the environment and returns
    it stores ``***`` in its place, in the trajectory and in the answer."""
    from tests.conftest import smoke_eval, write_registry

    key = "sk-test-0123456789abcdef"
    lines = json.dumps({"id": "c0", "input": 'Call whoami with {}.', "ideal": "x"}) + "\n"
    tool = {"name": "whoami", "description": "Who am I?", "parameters_json": "{}",
            "implementation": "echo_tools:whoami"}
    spec = smoke_eval(tools=[tool], matcher={"kind": "no_tool_errors"})
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": spec},
                              data={"data/g/e/test.jsonl": lines})
    (registry / "echo_tools.py").write_text(
        "import os\n\n\ndef whoami() -> str:\n    return 'key ' + os.environ['EVALHYDRA_TEST_KEY']\n")
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                   "run.progress=false", "service.api_key_env=EVALHYDRA_TEST_KEY", cwd=tmp_path,
                   env={"EVALHYDRA_TEST_KEY": key})
    assert done.returncode == 0, done.stderr
    stored = (tmp_path / "s.db").read_bytes()
    assert key.encode() not in stored
    (row,) = query_rows(tmp_path / "s.db", "select result from tool_calls")
    assert row["result"] == "key ***"
