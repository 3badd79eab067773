"""Span drafts out: a file of OTLP JSON lines, or OTLP/HTTP through the OpenTelemetry SDK.

``telemetry.export=file`` writes ``telemetry.jsonl`` in the run's folder: one line per batch of
cells, each an OTLP ``ExportTraceServiceRequest`` in OTLP's JSON encoding
(:mod:`evalhydra.telemetry.otlp_json`), the format the OpenTelemetry Collector's file exporter
writes and its OTLP JSON receiver reads.
``telemetry.export=otlp`` sends the same spans to ``telemetry.endpoint`` with the SDK's OTLP/HTTP
(protobuf) exporter, its headers from the standard ``OTEL_EXPORTER_OTLP_HEADERS`` variable.
Nothing leaves the machine unless an endpoint is configured.

The SDK is an extra (``pip install "evalhydra[otel]"``); without it any export stops before the
run (exit 2, naming the extra). Only ``otlp`` imports it to send.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.version import __version__
from evalhydra.store.inserts import typed_row
from evalhydra.store.rows import ResultRow
from evalhydra.telemetry.cells import CLIENT, CellFacts, SpanDraft, cell_spans, run_span
from evalhydra.telemetry.otlp_json import export_line

__all__ = ["EXPORTS", "FILE_NAME", "JsonLinesWriter", "SdkWriter", "SpanSink", "check_export", "open_sink"]

#: Where telemetry goes: nowhere, a file in the run's folder, or an OTLP/HTTP endpoint.
EXPORTS = ("none", "file", "otlp")
FILE_NAME = "telemetry.jsonl"
#: The instrumentation scope evalhydra's spans name.
SCOPE = "evalhydra"
_EXTRA = 'pip install "evalhydra[otel]"'


def check_export(export: str, endpoint: str | None) -> None:
    """Refuse a telemetry setting that cannot work, before any call.

    Raises:
        EvalHydraError: An unknown export, ``otlp`` without an endpoint, or the SDK missing.
    """
    if export not in EXPORTS:
        raise EvalHydraError(f"telemetry.export={export}: not one of {', '.join(EXPORTS)}.",
                             "telemetry.export=file writes OTLP JSON lines in the run's folder.")
    if export == "otlp" and not endpoint:
        raise EvalHydraError("telemetry.export=otlp needs telemetry.endpoint (an OTLP/HTTP traces URL).",
                             "For example telemetry.endpoint=http://127.0.0.1:4318/v1/traces.")
    if export != "none":  # the telemetry extra, whichever export (its packages read what is written)
        try:
            import opentelemetry.exporter.otlp.proto.http  # noqa: F401
            import opentelemetry.sdk.trace  # noqa: F401
        except ImportError:
            raise EvalHydraError(f"telemetry.export={export} needs the OpenTelemetry SDK, which is not"
                                 " installed.", f"Install it: {_EXTRA}") from None


class SpanSink:
    """Cells' spans on their way out: :meth:`record` takes a written batch's rows; ``writer`` takes
    the drafts (:class:`JsonLinesWriter`, or :class:`SdkWriter` over any SDK span exporter)."""

    def __init__(self, writer: Any, facts: Mapping[str, CellFacts], capture_content: bool) -> None:
        self.writer, self.facts, self.capture_content = writer, facts, capture_content
        self._lock = threading.Lock()  # batches are written from worker threads

    def record(self, rows: Iterable[ResultRow | Mapping[str, Any]]) -> None:
        """Export the spans of these cells (one export)."""
        drafts = [d for row in map(typed_row, rows)
                  for d in cell_spans(row, self.facts.get(row.eval_id), capture_content=self.capture_content)]
        if drafts:
            with self._lock:
                self.writer.write(drafts)

    def record_run(self, run_id: str, start_ns: int, end_ns: int, targets: list[dict[str, Any]]) -> None:
        """Export the run's own span (:func:`~evalhydra.telemetry.cells.run_span`)."""
        with self._lock:
            self.writer.write([run_span(run_id, start_ns, end_ns, targets)])

    def close(self) -> None:
        """Flush and close."""
        with self._lock:
            self.writer.close()


def open_sink(export: str, *, run_dir: Path, endpoint: str | None, facts: Mapping[str, CellFacts],
              capture_content: bool) -> SpanSink | None:
    """The run's span sink (None with ``export=none``)."""
    if export == "none":
        return None
    if export == "file":
        return SpanSink(JsonLinesWriter(run_dir / FILE_NAME), facts, capture_content)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return SpanSink(SdkWriter(OTLPSpanExporter(endpoint=endpoint)), facts, capture_content)


class JsonLinesWriter:
    """Each export as one line of OTLP JSON (:func:`~evalhydra.telemetry.otlp_json.export_line`)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = path.open("a", encoding="utf-8")

    def write(self, drafts: list[SpanDraft]) -> None:
        """Append the drafts as one line."""
        self.handle.write(export_line(drafts) + "\n")
        self.handle.flush()

    def close(self) -> None:
        """Close the file."""
        self.handle.close()


class SdkWriter:
    """The drafts through an OpenTelemetry SDK span exporter, as the SDK's ``ReadableSpan``s."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter

    def write(self, drafts: list[SpanDraft]) -> None:
        """Export the drafts."""
        self.exporter.export(_readable(drafts))

    def close(self) -> None:
        """Shut the exporter down (it flushes)."""
        self.exporter.shutdown()


def _readable(drafts: list[SpanDraft]) -> list[Any]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    resource = Resource.create({"service.name": "evalhydra"})
    scope = InstrumentationScope(SCOPE, __version__)
    sampled = TraceFlags(TraceFlags.SAMPLED)
    spans = []
    for d in drafts:
        context = SpanContext(d.trace_id, d.span_id, is_remote=False, trace_flags=sampled)
        parent = (SpanContext(d.trace_id, d.parent_id, is_remote=False, trace_flags=sampled)
                  if d.parent_id is not None else None)
        status = Status(StatusCode.ERROR, d.error) if d.error else Status(StatusCode.UNSET)
        spans.append(ReadableSpan(
            d.name, context, parent, resource, d.attributes,
            [Event(name, attributes, timestamp) for name, attributes, timestamp in d.events],
            kind=SpanKind.CLIENT if d.kind == CLIENT else SpanKind.INTERNAL, status=status,
            start_time=d.start_ns, end_time=d.end_ns, instrumentation_scope=scope))
    return spans
