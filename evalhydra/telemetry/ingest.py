"""An agent's OpenTelemetry traces as recorded answers: scored without running the agent again.

A trace of an agent instrumented with the GenAI semantic conventions holds what the agent did:
``execute_tool {name}`` spans (``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``), ``chat`` and
``invoke_agent`` spans with their usage and, when content was captured, ``gen_ai.output.messages``.
Each trace becomes the ``sample`` of the case it names (by a span attribute, ``evalhydra.case_id``
unless told otherwise): its final answer (``output_text``), its tool calls in order
(``output_tools``), its model and usage. Written into a copy of the eval's dataset, the samples are
what ``service=recorded`` answers with, so every answer and tool-call matcher scores the traces.

Traces come as OTLP JSON lines (an ``ExportTraceServiceRequest`` a line, ids in hex or base64, as
the Collector's file exporter and evalhydra's ``telemetry.export=file`` write them), or as OTLP
protobuf files (``.pb``, with ``pip install "evalhydra[otel]"``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.outfiles import write_output
from evalhydra.core.strictjson import json_lines
from evalhydra.telemetry import semconv as sc

__all__ = ["Ingested", "ingest_traces", "read_spans", "request_spans", "trace_samples", "write_recorded"]

#: The span attribute that names a trace's case unless told otherwise.
CASE_KEY = "evalhydra.case_id"
#: The name evalhydra's run span starts with (:func:`~evalhydra.telemetry.cells.run_span`).
RUN_SPAN = "evalhydra run "


@dataclass
class Ingested:
    """What an ingest did: each case's sample, and the traces no case claimed."""

    samples: dict[str, dict[str, Any]] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)  # trace ids naming no case
    duplicates: list[str] = field(default_factory=list)  # cases named by more than one trace


def read_spans(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Every span of the files, each as a dict: ``traceId``, ``spanId``, ``parentSpanId``, ``name``,
    ``start`` (ns), ``attributes`` (plain values).

    Raises:
        EvalHydraError: A line that is not JSON (its file and line), or a ``.pb`` file that is not
            OTLP protobuf.
    """
    for path in paths:
        if path.suffix == ".pb":
            yield from _protobuf_spans(path)
            continue
        for _, document in json_lines(path):
            yield from _json_spans(document)


def trace_samples(spans: Iterable[dict[str, Any]], case_key: str = CASE_KEY) -> Ingested:
    """Each trace's sample, by the case its ``case_key`` attribute names."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        traces.setdefault(span["traceId"], []).append(span)
    found = Ingested()
    for trace, members in traces.items():
        case = next((str(s["attributes"][case_key]) for s in members if case_key in s["attributes"]), None)
        if case is None and all(s["name"].startswith(RUN_SPAN) for s in members):
            continue  # evalhydra's own run span: no agent's trace
        if case is None:
            found.unmatched.append(trace)
        elif case in found.samples:
            found.duplicates.append(case)
        else:
            found.samples[case] = _sample(sorted(members, key=lambda s: s["start"]))
    return found


def ingest_traces(traces: list[Path], dataset: Path, out: Path,
                  case_key: str = CASE_KEY) -> tuple[Ingested, int]:
    """Write ``dataset``'s lines to ``out``, each case with its trace's ``sample``; returns the
    ingest and how many cases found no trace (they keep no sample: ``service=recorded`` says so).

    Raises:
        EvalHydraError: A trace file or the dataset cannot be read.
    """
    return write_recorded(read_spans(traces), dataset, out, case_key)


def write_recorded(spans: Iterable[dict[str, Any]], dataset: Path, out: Path,
                   case_key: str = CASE_KEY) -> tuple[Ingested, int]:
    """:func:`ingest_traces` over spans already read (:func:`read_spans`, or a receiver's)."""
    found = trace_samples(spans, case_key)
    missing = 0
    lines = []
    for _, case in json_lines(dataset):
        sample = found.samples.get(str(case.get("id"))) if isinstance(case, dict) else None
        if sample is None or not isinstance(case, dict):
            missing += 1
        else:
            case["sample"] = sample
        lines.append(json.dumps(case, ensure_ascii=False))
    write_output(out, "".join(f"{line}\n" for line in lines))
    return found, missing


def _sample(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """A trace's recorded answer: its last output message's text, its tool calls, model and usage."""
    tools = [s for s in spans if s["attributes"].get(sc.OPERATION) == "execute_tool"
             or s["name"].startswith("execute_tool")]
    chats = [s for s in spans if s["attributes"].get(sc.OPERATION) == "chat"]
    roots = [s for s in spans if not s.get("parentSpanId")]
    answer = next((text for s in [*roots, *reversed(chats)]
                   if (text := _output_text(s["attributes"].get(sc.OUTPUT_MESSAGES))) is not None), "")
    model = next((s["attributes"].get(sc.RESPONSE_MODEL) or s["attributes"].get(sc.REQUEST_MODEL)
                  for s in reversed(chats or roots) if s["attributes"].get(sc.REQUEST_MODEL)), None)
    usage = {"prompt_tokens": sum(int(s["attributes"].get(sc.INPUT_TOKENS) or 0) for s in chats),
             "completion_tokens": sum(int(s["attributes"].get(sc.OUTPUT_TOKENS) or 0) for s in chats)}
    sample: dict[str, Any] = {"output_text": answer, "usage": usage, "output_tools": [
        {"type": "function", "function": {"name": str(t["attributes"].get(sc.TOOL_NAME) or
                                                      t["name"].removeprefix("execute_tool ")),
                                          "arguments": _arguments(t["attributes"].get(sc.TOOL_ARGUMENTS))}}
        for t in tools]}
    if model:
        sample["model"] = str(model)
    return sample


def _output_text(messages: Any) -> str | None:
    """The text of the last assistant message of ``gen_ai.output.messages`` (the conventions' JSON
    of ``{role, parts: [{type: text, content}]}``; a plain string is taken as it is)."""
    if messages is None:
        return None
    try:
        parsed = json.loads(messages) if isinstance(messages, str) else messages
    except ValueError:
        return str(messages)
    if not isinstance(parsed, list):
        return str(messages)
    for message in reversed(parsed):
        if isinstance(message, dict) and message.get("role") in ("assistant", None):
            texts = [str(p.get("content")) for p in message.get("parts") or []
                     if isinstance(p, dict) and p.get("type") == "text"]
            if texts:
                return "".join(texts)
    return None


def _arguments(value: Any) -> str:
    if value is None:
        return "{}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _json_spans(document: Any) -> Iterator[dict[str, Any]]:
    for resource in (document or {}).get("resourceSpans") or []:
        for scope in resource.get("scopeSpans") or []:
            for span in scope.get("spans") or []:
                attributes = {a.get("key"): _plain(a.get("value")) for a in span.get("attributes") or []}
                yield {"traceId": _hex(span.get("traceId")), "spanId": _hex(span.get("spanId")),
                       "parentSpanId": _hex(span.get("parentSpanId")), "name": str(span.get("name") or ""),
                       "start": int(span.get("startTimeUnixNano") or 0), "attributes": attributes}


def _hex(value: Any) -> str:
    """An id as hex, whether OTLP JSON wrote it in hex or protobuf JSON in base64."""
    if not value:
        return ""
    text = str(value)
    if len(text) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    return base64.b64decode(text).hex()


def _plain(value: Any) -> Any:
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [_plain(v) for v in (inner or {}).get("values") or []]
    return inner


def _protobuf_spans(path: Path) -> Iterator[dict[str, Any]]:
    yield from request_spans(path.read_bytes(), protobuf=True, where=str(path))


def request_spans(body: bytes, *, protobuf: bool, where: str) -> list[dict[str, Any]]:
    """The spans of one OTLP export request's body (protobuf, or OTLP JSON).

    Raises:
        EvalHydraError: A body that is not an OTLP export, naming ``where``; protobuf without the
            OpenTelemetry packages.
    """
    if not protobuf:
        try:
            return list(_json_spans(json.loads(body)))
        except (ValueError, AttributeError) as exc:
            raise EvalHydraError(f"{where}: not an OTLP JSON export ({exc}).") from None
    try:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:
        raise EvalHydraError(f"{where}: reading OTLP protobuf needs the OpenTelemetry packages.",
                             'Install them: pip install "evalhydra[otel]"') from None
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except Exception as exc:  # noqa: BLE001 (protobuf's DecodeError, or worse: one message for all)
        raise EvalHydraError(f"{where}: not an OTLP protobuf export ({type(exc).__name__}).") from None
    return list(_json_spans(MessageToDict(request)))
