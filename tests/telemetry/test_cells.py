"""Issue 64, item 1: a stored cell's spans, built from its row alone: an MCP server's tool call
carries the MCP attributes beside the execute_tool ones; the trace id the requests announced."""

from __future__ import annotations

import json

from evalhydra.store.rows import ResultRow
from evalhydra.telemetry import semconv as sc
from evalhydra.telemetry.cells import cell_spans, traceparent


def _row(calls: list[dict[str, object]]) -> ResultRow:
    turns = [{"turn": 1, "latency_ms": 5.0, "calls": len(calls)}, {"turn": 2, "latency_ms": 5.0, "calls": 0}]
    trajectory = {"stop_reason": "model_stopped", "turns": turns, "tool_calls": calls}
    return ResultRow.from_mapping({
        "cell_key": "k1", "run_id": "r1", "group": "g", "eval_id": "g.e", "service_name": "svc", "model": "m",
        "run_index": 1, "case_id": "c1", "kind": "chat", "status": "PASS", "passed": True, "score": 1.0,
        "latency_ms": 20, "evaluated_at": "2026-12-07T20:00:00.000Z",
        "details": json.dumps({"trajectory": trajectory})})


def test_an_mcp_tool_call_carries_the_mcp_attributes() -> None:
    calls = [{"turn": 1, "name": "notes__read", "original_name": "notes:read", "latency_ms": 2.0},
             {"turn": 1, "name": "lookup", "original_name": "lookup", "latency_ms": 1.0}]
    spans = cell_spans(_row(calls), None)
    tools = {s.name: s.attributes for s in spans if s.name.startswith("execute_tool")}
    assert tools["execute_tool notes__read"][sc.MCP_METHOD] == "tools/call"
    assert tools["execute_tool notes__read"]["evalhydra.mcp.server"] == "notes"
    assert sc.MCP_METHOD not in tools["execute_tool lookup"]


def test_the_root_is_the_span_the_requests_named() -> None:
    (root, *children) = cell_spans(_row([]), None)
    _, trace, span, _ = traceparent("r1", "k1").split("-")
    assert (f"{root.trace_id:032x}", f"{root.span_id:016x}") == (trace, span)
    assert all(c.parent_id == root.span_id and c.trace_id == root.trace_id for c in children)
    assert root.end_ns - root.start_ns == 20_000_000 and [c.name for c in children] == ["chat m", "chat m"]
