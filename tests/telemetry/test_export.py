"""Issue 64, items 1 and 2: every cell as OpenTelemetry GenAI spans with its verdict as a
``gen_ai.evaluation.result`` event, to a file of OTLP JSON lines (read back through the OTLP
protobuf types), to the SDK's own in-memory exporter, and to an OTLP/HTTP receiver on loopback
through the SDK's OTLP exporter; each cell's ``traceparent`` on its requests; content off by
default; settings that cannot work refused with exit 2."""

from __future__ import annotations

import base64
import json
import sqlite3
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evalhydra
from evalhydra.core.errors import EvalHydraError
from evalhydra.store.db import open_store
from evalhydra.telemetry import semconv as sc
from evalhydra.telemetry.cells import traceparent
from evalhydra.telemetry.export import SdkWriter, SpanSink, check_export
from tests.helpers import http_server, mock_call, mock_process


def _run(tmp_path: Path, *overrides: str) -> evalhydra.EvalResult:
    return evalhydra.evaluate([f"store.path={tmp_path / 's.db'}", f"hydra.run.dir={tmp_path / 'out'}",
                               *overrides])


def _written(tmp_path: Path) -> Path:
    """The run's telemetry file, in its report folder."""
    (found,) = tmp_path.rglob("telemetry.jsonl")
    return found


def _cell_spans(path: Path) -> list[dict[str, Any]]:
    """The cells' spans (every span but the run's own)."""
    return [s for s in _spans(path) if not s["name"].startswith("evalhydra run ")]


def _spans(path: Path) -> list[dict[str, Any]]:
    """Every span of a file of OTLP JSON lines, each line checked against OTLP's protobuf schema."""
    spans = []
    for line in path.read_text().splitlines():
        document = json.loads(line)
        ParseDict(_base64_ids(document), ExportTraceServiceRequest())  # a valid OTLP export request
        for resource in document["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                spans += scope["spans"]
    return spans


def _base64_ids(value: Any) -> Any:
    """OTLP JSON's hex ids as protobuf JSON's base64, to parse with the protobuf types."""
    if isinstance(value, list):
        return [_base64_ids(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId")
            else _base64_ids(v) for k, v in value.items()}


def _attrs(entry: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in entry.get("attributes", [])}


@pytest.mark.slow
def test_a_tool_loops_cells_are_traces_with_their_requests_calls_and_verdicts(tmp_path: Path) -> None:
    result = _run(tmp_path, "eval=tools.order_desk", "telemetry.export=file")
    spans = _cell_spans(_written(tmp_path))
    roots = [s for s in spans if "parentSpanId" not in s]
    assert len(roots) == 2 and {s["name"] for s in roots} == {"invoke_agent mock"}
    store = open_store(tmp_path / "s.db", read_only=True)
    cells = dict(store.conn.execute("select case_id, cell_key from results").fetchall())
    store.close()
    for root in roots:
        attrs = _attrs(root)
        assert attrs[sc.OPERATION] == "invoke_agent" and attrs[sc.PROVIDER] == "openai"
        expected = traceparent(result.run_id or "", cells[attrs["evalhydra.case_id"]]).split("-")
        assert (root["traceId"], root["spanId"]) == (expected[1], expected[2])  # the trace its requests named
        event = root["events"][0]
        verdict = _attrs(event)
        assert event["name"] == sc.EVALUATION_EVENT and verdict[sc.EVALUATION_NAME] == "all_of"
        assert verdict[sc.SCORE_LABEL] == "pass" and verdict[sc.SCORE_VALUE] == 1.0
        assert verdict["evalhydra.run_id"] == result.run_id and verdict["evalhydra.trial"] == "1"
        children = [s for s in spans if s.get("parentSpanId") == root["spanId"]]
        chat = "chat mock-model"
        tools = ["execute_tool lookup_order", "execute_tool refund"]
        assert [s["name"] for s in children] == [chat, tools[0], chat, tools[1], chat]
        assert all(s["traceId"] == root["traceId"] for s in children)
        starts = [int(s["startTimeUnixNano"]) for s in children]
        assert starts == sorted(starts) and int(root["startTimeUnixNano"]) <= starts[0]
        for chat_span in children[::2]:  # each request: what its reply said of itself
            reply = _attrs(chat_span)
            assert reply[sc.RESPONSE_MODEL] == "mock-model" and reply[sc.RESPONSE_ID].startswith("chatcmpl-")
        finishes = [_attrs(s)[sc.FINISH_REASONS]["values"] for s in children[::2]]
        assert finishes == [[{"stringValue": "tool_calls"}]] * 2 + [[{"stringValue": "stop"}]]
        parts = [_attrs(e) for e in root["events"][1:]]  # the composite's parts, a verdict each
        names = ["includes", "tool_sequence", "no_tool_errors", "state"]
        assert [p[sc.EVALUATION_NAME] for p in parts] == names
        assert all(p["evalhydra.composite"] == "all_of" and p[sc.SCORE_LABEL] == "pass" for p in parts)
    for span in spans:
        conforms(span)
        assert sc.INPUT_MESSAGES not in _attrs(span) and sc.TOOL_ARGUMENTS not in _attrs(span)  # opt-in


def conforms(span: dict[str, Any]) -> None:
    """The span and its events name every attribute the spec requires of them, and none but the
    spec's own for them and evalhydra's ``evalhydra.*``."""
    attrs = _attrs(span)
    operation = attrs[sc.OPERATION]
    assert all(name in attrs for name in sc.REQUIRED[operation]), span["name"]
    assert {n for n in attrs if not n.startswith("evalhydra.")} <= sc.DEFINED[operation], span["name"]
    for event in span.get("events", []):  # a verdict: its name, and a label or an error
        verdict = _attrs(event)
        assert all(name in verdict for name in sc.REQUIRED[event["name"]])
        assert {n for n in verdict if not n.startswith("evalhydra.")} <= sc.DEFINED[event["name"]]
        assert (sc.SCORE_LABEL in verdict) != (sc.ERROR_TYPE in verdict)


def test_content_is_captured_only_when_asked(tmp_path: Path) -> None:
    _run(tmp_path, "eval=tools.order_desk", "telemetry.export=file", "telemetry.capture_content=true")
    spans = _spans(_written(tmp_path))
    tools = [_attrs(s) for s in spans if s["name"] == "execute_tool refund"]
    assert {"order_id": 7, "reason": "damaged"} in [json.loads(t[sc.TOOL_ARGUMENTS]) for t in tools]
    assert any("Refunded order" in _attrs(s).get(sc.OUTPUT_MESSAGES, "") for s in spans)


@pytest.mark.slow
def test_each_request_carries_its_cells_traceparent(tmp_path: Path) -> None:
    with mock_process() as url:
        result = _run(tmp_path, "eval=smoke", "service.mock.enabled=false", f"service.base_url={url}",
                      "telemetry.export=file", "run.limit=1", "trials=1")
        sent = mock_call(url, "last_headers")
    key, finish, reply_id = sqlite3.connect(tmp_path / "s.db").execute(
        "select cell_key, finish_reason, response_id from results").fetchone()
    assert sent["traceparent"] == traceparent(result.run_id or "", key)
    assert sent["baggage"] == f"evalhydra.run_id={result.run_id},evalhydra.case_id=case-1,evalhydra.trial=1"
    (root,) = [s for s in _cell_spans(_written(tmp_path)) if "parentSpanId" not in s]
    assert root["name"] == "chat mock-model" and sent["traceparent"].split("-")[1] == root["traceId"]
    conforms(root)
    attrs = _attrs(root)
    assert finish == "stop" and attrs[sc.FINISH_REASONS] == {"values": [{"stringValue": "stop"}]}
    assert reply_id.startswith("chatcmpl-") and attrs[sc.RESPONSE_ID] == reply_id
    assert _attrs(root["events"][0])[sc.RESPONSE_ID] == reply_id  # the verdict names the reply it judged


@pytest.mark.slow
def test_without_telemetry_no_request_carries_a_traceparent(tmp_path: Path) -> None:
    with mock_process() as url:
        _run(tmp_path, "eval=smoke", "service.mock.enabled=false", f"service.base_url={url}", "run.limit=1",
             "trials=1")
        assert "traceparent" not in mock_call(url, "last_headers")
    assert not list(tmp_path.rglob("telemetry.jsonl"))


def test_the_sdks_own_exporter_takes_the_spans(tmp_path: Path) -> None:
    """The spans are the SDK's ReadableSpans: its in-memory exporter holds them as written."""
    _run(tmp_path, "eval=smoke", "trials=2")
    store = open_store(tmp_path / "s.db", read_only=True)
    rows = [dict(r) for r in store.query("select * from results")]
    store.close()
    memory = InMemorySpanExporter()
    SpanSink(SdkWriter(memory), {}, capture_content=False).record(rows)
    finished = memory.get_finished_spans()
    assert len(finished) == len(rows) and all(s.name == "chat mock-model" for s in finished)
    assert {s.events[0].attributes[sc.SCORE_LABEL] for s in finished} <= {"pass", "fail"}
    assert all(s.end_time >= s.start_time for s in finished)


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps each export request's protobuf body."""

    received: list[ExportTraceServiceRequest] = []

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.received.append(request)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    _Collector.received = []
    with http_server(_Collector) as port:
        yield f"http://127.0.0.1:{port}/v1/traces"


def test_otlp_export_reaches_an_otlp_http_receiver(tmp_path: Path, collector: str) -> None:
    _run(tmp_path, "eval=smoke", "trials=2", "telemetry.export=otlp", f"telemetry.endpoint={collector}")
    spans = [s for r in _Collector.received for rs in r.resource_spans for ss in rs.scope_spans
             for s in ss.spans]
    cells = [s for s in spans if not s.name.startswith("evalhydra run ")]
    assert len(cells) == 4 and all(s.name == "chat mock-model" for s in cells)  # 2 cases × 2 trials
    assert all(e.name == sc.EVALUATION_EVENT for s in cells for e in s.events)


@pytest.mark.parametrize(("overrides", "message"), [
    (["telemetry.export=jaeger"], "telemetry.export=jaeger: not one of none, file, otlp"),
    (["telemetry.export=otlp"], "telemetry.export=otlp needs telemetry.endpoint"),
])
def test_a_setting_that_cannot_work_is_refused_before_any_call(tmp_path: Path, overrides: list[str],
                                                                message: str) -> None:
    with pytest.raises(EvalHydraError, match=message):
        _run(tmp_path, "eval=smoke", *overrides)
    assert not (tmp_path / "s.db").exists()


def test_without_the_sdk_the_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    for export, endpoint in (("file", None), ("otlp", "http://127.0.0.1:4318/v1/traces")):
        with pytest.raises(EvalHydraError) as raised:
            check_export(export, endpoint)
        assert raised.value.hint == 'Install it: pip install "evalhydra[otel]"'


def test_the_run_is_a_span_with_each_targets_pass_rate_and_interval(tmp_path: Path) -> None:
    result = _run(tmp_path, "eval=smoke", "trials=3", "telemetry.export=file")
    (run,) = [s for s in _spans(_written(tmp_path)) if s["name"].startswith("evalhydra run ")]
    assert run["name"] == f"evalhydra run {result.run_id}"
    assert _attrs(run)["evalhydra.targets"] == str(len(result.stats))
    targets = {_attrs(e)["evalhydra.eval_id"]: _attrs(e) for e in run["events"]}
    shown = {s["eval"]: s for s in result.stats}
    assert set(targets) == set(shown)
    for eval_id, target in targets.items():
        assert target["evalhydra.pass_rate"] == shown[eval_id]["pass_rate"]
        assert target["evalhydra.ci_low"] == shown[eval_id]["ci_low"]
        assert target["evalhydra.ci_high"] == shown[eval_id]["ci_high"]


@pytest.mark.slow
def test_a_judges_verdicts_carry_its_measured_agreement(tmp_path: Path) -> None:
    """Issue 64, item 1: a judge verdict's event names the judge and its sensitivity, specificity
    and label count against the labels stored before the run."""
    from evalhydra.store.db import immediate
    from evalhydra.store.labels import import_labels

    _run(tmp_path, "eval=quality.helpful_summary")
    store = open_store(tmp_path / "s.db")
    cases = [c for (c,) in store.conn.execute("select case_id from results order by case_id")]
    with immediate(store.conn):  # a person agrees with every verdict of the first run
        for case_id, passed in store.conn.execute("select case_id, passed from results").fetchall():
            import_labels(store.conn, [(f"x:{case_id}", {"eval": "quality.helpful_summary", "case": case_id,
                                                         "label": "PASS" if passed else "FAIL"})])
    store.close()
    again = _run(tmp_path, "eval=quality.helpful_summary", "run.fresh=true", "telemetry.export=file")
    written = tmp_path / "runs" / str(again.run_id) / "telemetry.jsonl"
    events = [_attrs(e) for s in _cell_spans(written) for e in s.get("events", [])]
    assert len(events) == len(cases)
    for verdict in events:
        assert verdict["evalhydra.judge.service"] == "mock_judge"
        assert verdict["evalhydra.judge.labels"] == str(len(cases))
        measured = {verdict.get("evalhydra.judge.sensitivity"), verdict.get("evalhydra.judge.specificity")}
        assert measured <= {1.0, None} and measured != {None}  # it agreed with every label


def test_an_infrastructure_error_is_an_errored_span_without_a_verdict_label(tmp_path: Path) -> None:
    _run(tmp_path, "eval=smoke", "trials=1", "service.mock.fail_rate=1.0", "run.fail_fast=false",
         "telemetry.export=file")
    roots = [s for s in _cell_spans(_written(tmp_path)) if "parentSpanId" not in s]
    assert roots and all(s["status"]["code"] == 2 for s in roots)  # STATUS_CODE_ERROR
    for root in roots:
        verdict = _attrs(root["events"][0])
        assert _attrs(root)[sc.ERROR_TYPE] == verdict[sc.ERROR_TYPE] and sc.SCORE_LABEL not in verdict
