"""Issue 64, items 3 and 5: an agent's OTLP traces as recorded answers, scored without running the
agent again; the round trip export → ingest → service=recorded reproduces each cell's tool calls
and verdict; traces that name no case are reported, not dropped silently."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import evalhydra
from evalhydra.core.errors import EvalHydraError
from evalhydra.store.db import open_store
from evalhydra.telemetry.ingest import ingest_traces, read_spans, trace_samples
from tests.conftest import write_registry

REGISTRY = Path(__file__).resolve().parents[2] / "registry"
CASES = REGISTRY / "data" / "tools" / "order_desk" / "test.jsonl"


def _rows(store: Path) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """Each case's verdict and tool calls (name, arguments), as stored."""
    reader = open_store(store, read_only=True)
    rows = reader.conn.execute("select case_id, passed, tool_calls from results").fetchall()
    reader.close()
    return {case: (passed, [(c["name"], json.dumps(json.loads(c["arguments"]), sort_keys=True))
                            for c in json.loads(calls or "[]")]) for case, passed, calls in rows}


def _export(tmp_path: Path) -> tuple[evalhydra.EvalResult, Path]:
    result = evalhydra.evaluate(["eval=tools.order_desk", f"store.path={tmp_path / 'a.db'}",
                                 "telemetry.export=file", "telemetry.capture_content=true"])
    return result, tmp_path / "runs" / str(result.run_id) / "telemetry.jsonl"


def _recorded_eval(tmp_path: Path, dataset: Path) -> Path:
    spec = {"id": "rec.order_desk", "group": "rec", "description": "the order desk's recorded traces",
            "dataset_path": "data/recorded.jsonl", "split": "test", "default_run_count": 1,
            "matcher": {"kind": "all_of", "parts": [
                {"kind": "includes"}, {"kind": "tool_sequence", "steps": ["lookup_order", "refund"]}]}}
    return write_registry(tmp_path / "reg", evals={"rec/order_desk.json": spec},
                          data={"data/recorded.jsonl": dataset.read_text()})


def test_an_export_round_trips_into_recorded_answers_scored_alike(tmp_path: Path) -> None:
    first, traces = _export(tmp_path)
    found, missing = ingest_traces([traces], CASES, tmp_path / "recorded.jsonl")
    assert set(found.samples) == {"broken-7", "broken-9"} and missing == 0 and not found.unmatched
    registry = _recorded_eval(tmp_path, tmp_path / "recorded.jsonl")
    second = evalhydra.evaluate([f"registry={registry}", "eval=rec.order_desk", "service=recorded",
                                 f"store.path={tmp_path / 'b.db'}"])
    assert second.exit_code == 0
    assert _rows(tmp_path / "b.db") == _rows(tmp_path / "a.db")  # the same calls, the same verdicts
    assert {s["passed"] for s in first.stats} == {s["passed"] for s in second.stats} == {2}


@pytest.mark.slow
def test_traces_that_name_no_case_are_reported(tmp_path: Path) -> None:
    _, traces = _export(tmp_path)
    spans = list(read_spans([traces]))
    for span in spans:  # one trace loses its case
        if span["attributes"].get("evalhydra.case_id") == "broken-9":
            del span["attributes"]["evalhydra.case_id"]
    found = trace_samples(spans)
    assert set(found.samples) == {"broken-7"} and len(found.unmatched) == 1
    shown = subprocess.run([sys.executable, "-m", "evalhydra", "ingest", "otlp", str(traces), "--cases",
                            str(CASES), "--out", str(tmp_path / "r.jsonl"), "--case-key", "nope"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 2 and shown.stderr.startswith("error: no trace names a case")
    (tmp_path / "a-file").write_text("")
    blocked = subprocess.run([sys.executable, "-m", "evalhydra", "ingest", "otlp", str(traces), "--cases",
                              str(CASES), "--out", str(tmp_path / "a-file" / "r.jsonl")],
                             capture_output=True, text=True, timeout=60)
    assert blocked.returncode == 2 and blocked.stderr.startswith("error: --out ")
    assert "a file stands where its folder would be" in blocked.stderr and "Traceback" not in blocked.stderr


def test_protobuf_traces_read_as_json_lines_do(tmp_path: Path) -> None:
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tests.telemetry.test_export import _base64_ids

    _, traces = _export(tmp_path)
    first = json.loads(traces.read_text().splitlines()[0])
    request = ParseDict(_base64_ids(first), ExportTraceServiceRequest())
    (tmp_path / "t.pb").write_bytes(request.SerializeToString())
    from_pb = trace_samples(read_spans([tmp_path / "t.pb"]))
    from_json = trace_samples(read_spans([traces]))
    assert from_pb.samples and from_pb.samples == {k: v for k, v in from_json.samples.items()
                                                   if k in from_pb.samples}


def test_a_file_that_is_not_otlp_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(EvalHydraError, match=r"bad.jsonl:1: invalid JSON"):
        list(read_spans([bad]))


@pytest.mark.slow
def test_a_receiver_on_loopback_takes_traces_with_its_token_only(tmp_path: Path) -> None:
    """``ingest otlp --listen``: an OTLP/HTTP exporter posts with the printed token; one without it
    is refused; Ctrl-C ends it and writes the recorded dataset."""
    import signal

    import httpx
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tests.telemetry.test_export import _base64_ids

    _, traces = _export(tmp_path)
    argv = [sys.executable, "-m", "evalhydra", "ingest", "otlp", "--listen", "127.0.0.1:0", "--cases",
            str(CASES), "--out", str(tmp_path / "r.jsonl")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        endpoint = proc.stdout.readline().split("listening on ", 1)[1].strip()
        token = proc.stdout.readline().split("authorization=Bearer ", 1)[1].split()[0]
        for line in traces.read_text().splitlines():
            body = ParseDict(_base64_ids(json.loads(line)), ExportTraceServiceRequest()).SerializeToString()
            headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {token}"}
            assert httpx.post(endpoint, content=body, headers=headers).status_code == 200
        assert httpx.post(endpoint, content=b"", headers={"authorization": "Bearer guess"}).status_code == 401
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "2 case(s) recorded" in out and "1 request(s) refused" in out
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    recorded = {case["id"]: case.get("sample") for case in lines}
    assert all(sample and sample["output_tools"] for sample in recorded.values())


def test_a_receiver_binds_loopback_only() -> None:
    from evalhydra.telemetry.receiver import TraceReceiver

    with pytest.raises(EvalHydraError, match="loopback only"):
        TraceReceiver("0.0.0.0", 0)


def test_the_receiver_takes_the_sdks_gzip_exports_and_refuses_bad_framing() -> None:
    """The OpenTelemetry SDK's own OTLP/HTTP exporter, compressing with gzip as
    ``OTEL_EXPORTER_OTLP_COMPRESSION=gzip`` makes it, posts to the receiver with its token; a body
    without a usable content-length or in another encoding is refused with a status, not a crash."""
    import socket
    import threading

    import httpx
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from evalhydra.telemetry.receiver import TraceReceiver

    receiver = TraceReceiver("127.0.0.1", 0)
    serving = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    serving.start()
    try:
        exporter = OTLPSpanExporter(endpoint=receiver.endpoint, compression=Compression.Gzip,
                                    headers={"authorization": f"Bearer {receiver.token}"})
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("agent").start_as_current_span("invoke_agent desk") as span:
            span.set_attribute("evalhydra.case_id", "c1")
        provider.shutdown()
        auth = {"authorization": f"Bearer {receiver.token}"}
        host, port = receiver.server.server_address[:2]
        with socket.create_connection((str(host), port)) as raw:  # a framing no HTTP client sends
            raw.sendall(f"POST /v1/traces HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {receiver.token}\r\n"
                        "content-length: one\r\n\r\nx".encode())
            framed = raw.recv(200).decode()
        with httpx.Client() as client:
            other = client.post(receiver.endpoint, content=b"x", headers={**auth, "content-encoding": "br"})
            broken = client.post(receiver.endpoint, content=b"not gzip",
                                 headers={**auth, "content-encoding": "gzip"})
    finally:
        receiver.server.shutdown()
        receiver.close()
    ((name, case),) = [(s["name"], s["attributes"].get("evalhydra.case_id")) for s in receiver.spans]
    assert (name, case) == ("invoke_agent desk", "c1")
    assert framed.startswith("HTTP/1.0 411 ") and other.status_code == 400 and broken.status_code == 400
    assert "content-encoding 'br'" in other.text and "does not inflate" in broken.text


def test_a_stalled_sender_is_dropped_and_the_receiver_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import threading

    import httpx

    from evalhydra.telemetry import receiver as receiver_module

    monkeypatch.setattr(receiver_module, "SOCKET_TIMEOUT_S", 0.2)
    receiver = receiver_module.TraceReceiver("127.0.0.1", 0)
    threading.Thread(target=receiver.server.serve_forever, daemon=True).start()
    try:
        host, port = receiver.server.server_address[:2]
        with socket.create_connection((str(host), port)) as raw:
            raw.sendall(f"POST /v1/traces HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {receiver.token}\r\n"
                        "content-type: application/json\r\ncontent-length: 100\r\n\r\n{".encode())
            raw.settimeout(5)
            assert raw.recv(100) == b""  # dropped after the timeout, without an answer or a traceback
        headers = {"authorization": f"Bearer {receiver.token}", "content-type": "application/json"}
        empty = httpx.post(receiver.endpoint, content=b'{"resourceSpans": []}', headers=headers)
    finally:
        receiver.server.shutdown()
        receiver.close()
    assert empty.status_code == 200
