"""Issue 64, item 4: the trace of an agent written with a real framework (pydantic-ai), instrumented
with its stock OpenTelemetry GenAI instrumentation against the mock, exported by the SDK's own
OTLP encoder, ingested with no adapter code and scored with tool_sequence and tool_args."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import evalhydra
from evalhydra.telemetry.cells import baggage
from tests.conftest import write_registry
from tests.helpers import mock_process

CASES = {"asks-7": 7, "asks-8": 8}


def _traces(path: Path, *, by_baggage: bool = False) -> None:
    """Run a pydantic-ai agent once per case, each run under a span naming its case (or, with
    ``by_baggage``, in the context of the ``baggage`` header evalhydra sends for the cell, which the
    stock ``BaggageSpanProcessor`` copies onto every span); write the spans as one OTLP protobuf
    export."""
    from opentelemetry import context
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.processor.baggage import ALLOW_ALL_BAGGAGE_KEYS, BaggageSpanProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BaggageSpanProcessor(ALLOW_ALL_BAGGAGE_KEYS))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with mock_process() as url:
        Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, include_content=True))
        try:
            agent = Agent(OpenAIChatModel("mock-model", provider=OpenAIProvider(base_url=url, api_key="k")))

            @agent.tool_plain
            def lookup_order(order_id: int) -> str:
                """Look an order up."""
                return f"order {order_id}: delivered"

            tracer = provider.get_tracer("cases")
            for case_id, order in CASES.items():
                prompt = (f'Call lookup_order with {{"order_id": {order}}}. '
                          f"Then reply with exactly Order {order} found.")
                if by_baggage:  # as a served agent reads the request evalhydra sent it
                    incoming = W3CBaggagePropagator().extract({"baggage": baggage("run-1", case_id, 1)})
                    token = context.attach(incoming)
                    try:
                        agent.run_sync(prompt)
                    finally:
                        context.detach(token)
                    continue
                with tracer.start_as_current_span("case", attributes={"evalhydra.case_id": case_id}):
                    agent.run_sync(prompt)
        finally:
            Agent.instrument_all(False)
    path.write_bytes(encode_spans(memory.get_finished_spans()).SerializeToString())


@pytest.mark.slow
# pydantic-ai's run_sync leaves its OpenAI client's asyncio transport to the garbage collector
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("by_baggage", [False, True], ids=["span-attribute", "baggage"])
def test_a_pydantic_ai_agents_traces_are_scored_without_running_it(tmp_path: Path, by_baggage: bool) -> None:
    _traces(tmp_path / "traces.pb", by_baggage=by_baggage)
    cases = "".join(json.dumps({"id": c, "input": "(recorded)", "ideal": f"Order {n} found"}) + "\n"
                    for c, n in CASES.items())
    (tmp_path / "cases.jsonl").write_text(cases)
    argv = [sys.executable, "-m", "evalhydra", "ingest", "otlp", str(tmp_path / "traces.pb"),
            "--cases", str(tmp_path / "cases.jsonl"), "--out", str(tmp_path / "recorded.jsonl")]
    ingested = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert ingested.returncode == 0 and "2 case(s) recorded" in ingested.stdout, ingested.stderr
    spec = {"id": "rec.orders", "group": "rec", "description": "a pydantic-ai agent's traces",
            "dataset_path": "data/recorded.jsonl", "split": "test", "default_run_count": 1,
            "matcher": {"kind": "all_of", "parts": [
                {"kind": "includes"}, {"kind": "tool_sequence", "steps": ["lookup_order"]},
                {"kind": "tool_args", "name": "lookup_order", "args": {"order_id": 7}}]}}
    registry = write_registry(tmp_path / "reg", evals={"rec/orders.json": spec},
                              data={"data/recorded.jsonl": (tmp_path / "recorded.jsonl").read_text()})
    result = evalhydra.evaluate([f"registry={registry}", "eval=rec.orders", "service=recorded",
                                 f"store.path={tmp_path / 's.db'}"])
    rows = {r["case_id"]: r for r in result.rows()}
    assert rows["asks-7"]["passed"] == 1  # the right call, the right answer
    assert rows["asks-8"]["passed"] == 0 and "tool_args" in rows["asks-8"]["failure_reason"]
    assert [c["name"] for c in json.loads(rows["asks-8"]["tool_calls"])] == ["lookup_order"]
