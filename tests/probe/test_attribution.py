"""Issue 65, item 3: points lost to the server. The recovering reader reads calls past each fault
it can undo; ``compare --attribute-server`` tells wire faults from model differences on two real
runs (one stack faulting a known share of replies), and the bench's replications hold the truth."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalhydra.probe.recover import recovered_calls, same_calls
from tests.helpers import run_cli

BENCH = Path(__file__).resolve().parents[2] / "bench" / "attribution.py"
CALL = {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}


@pytest.mark.parametrize(("wire", "calls"), [
    ({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"x": 1}'}}]}, [("f", {"x": 1})]),
    ({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": ""}}]}, [("f", {})]),
    # a reused index: the ids part the calls again
    ({"deltas": [CALL, {"index": 0, "function": {"arguments": '{"x":1}'}},
                 {**CALL, "id": "b", "function": {"name": "g", "arguments": ""}},
                 {"index": 0, "function": {"arguments": "{}"}}]}, [("f", {"x": 1}), ("g", {})]),
    # no index at all, a name sent again, a bare last delta
    ({"deltas": [{"id": "a", "function": {"name": "f", "arguments": '{"x"'}},
                 {"function": {"name": "f", "arguments": ":"}}, {"function": {"arguments": "1}"}}]},
     [("f", {"x": 1})]),
    # calls left in the content as markup, three templates
    ({"content": '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'}, [("f", {"x": 1})]),
    ({"content": '[TOOL_CALLS] [{"name": "f", "arguments": {"x": 1}}]'}, [("f", {"x": 1})]),
    ({"content": '<function=f>{"x": 1}</function>', "tool_calls": None}, [("f", {"x": 1})]),
    ({"content": "no call here"}, []),
    # what a hostile server sends where a call list would be: read as no call, never an error
    ({"content": "[TOOL_CALLS] 5"}, []),
    ({"content": '[TOOL_CALLS] {"name": "f"}'}, []),
    ({"deltas": ["x", {"function": "f"}, {"id": 3, "function": {"name": 7, "arguments": None}}]}, []),
    (None, []),
])
def test_the_recovering_reader_undoes_what_a_server_did(wire: object,
                                                         calls: list[tuple[str, object]]) -> None:
    assert same_calls(recovered_calls(wire), calls)


@pytest.mark.slow
def test_the_bench_finds_the_points_the_server_cost(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--cells", "200", "--seeds", "2"], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    rows, summary = lines[:-1], lines[-1]
    assert len(rows) == 6 and summary["replications"] == 6
    assert all(abs(r["estimate"] - r["truth"]) <= 0.015 and r["model_differences"] > 0 for r in rows)
    assert sorted({r["share"] for r in rows}) == [0.05, 0.15, 0.3] and any(r["truth"] > 0.05 for r in rows)
    assert done.returncode == 0


@pytest.mark.slow
def test_compare_attribute_server_on_two_stored_runs(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import attribution as bench
    finally:
        sys.path.remove(str(BENCH.parent))
    registry = bench.suite(tmp_path / "registry", 60)
    row = bench.replication(tmp_path, registry, 3, 0.3)
    store = next(tmp_path.glob("s3-*.db"))
    older, newer = row["run_a"], row["run_b"]
    shown = run_cli("compare", "--attribute-server", older, newer, "--store", str(store), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"B lost to its server (wire faults): {round(row['truth'] * 60)} cells" in shown.stdout
    assert "recovered [('get_weather'" in shown.stdout
    as_json = json.loads(run_cli("compare", "--attribute-server", older, newer, "--store", str(store),
                                 "--format", "json", cwd=tmp_path).stdout)
    assert as_json["points_lost_to_server"]["estimate"] == pytest.approx(row["estimate"])
    wrong = run_cli("compare", "--attribute-server", older, "--store", str(store), cwd=tmp_path)
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: --attribute-server needs two runs")


@pytest.mark.parametrize("stream", [False, True])
def test_record_wire_keeps_each_turns_calls_as_sent_whole_or_streamed(tmp_path: Path, stream: bool) -> None:
    """``service.record_wire`` on a tool loop: each agent turn with calls keeps its reply as sent (a
    whole reply's ``tool_calls``; a stream's raw deltas), which the recovering reader reads as the
    very calls the loop ran; without it nothing is kept."""
    import evalhydra

    rows = {}
    for record in (True, False):
        store = tmp_path / f"{record}.db"
        overrides = [f"service.stream={stream}".lower(), f"service.record_wire={record}".lower()]
        result = evalhydra.evaluate(["eval=tools.order_desk", f"store.path={store}", *overrides])
        assert result.exit_code == 0
        with sqlite3.connect(store) as conn:
            found = conn.execute("select details from results").fetchall()
        rows[record] = [json.loads(d)["trajectory"] for (d,) in found]
    assert any(t["calls"] for trajectory in rows[True] for t in trajectory["turns"])
    for trajectory in rows[True]:
        for turn in (t for t in trajectory["turns"] if t["calls"]):
            ran = [(c["name"], json.loads(c["arguments"] or "{}")) for c in trajectory["tool_calls"]
                   if c["turn"] == turn["turn"]]
            assert ("deltas" in turn["wire"]) is stream and ("tool_calls" in turn["wire"]) is not stream
            assert ran and same_calls(recovered_calls(turn["wire"]), ran)
    assert all("wire" not in t for trajectory in rows[False] for t in trajectory["turns"])
