"""Span drafts as OTLP's JSON encoding, written straight from the drafts.

The OTLP specification's JSON encoding of an ``ExportTraceServiceRequest``: ids as lowercase hex,
enums as integers, 64-bit integers as decimal strings, attributes as ``{key, value: {…Value}}``.
Written here as text, without a protobuf round trip or a dict per attribute, which cost more than a
run can spare per cell; ``tests/telemetry`` parses every line back with the OTLP protobuf types.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from typing import Any

from evalhydra.core.version import __version__
from evalhydra.telemetry.cells import CLIENT, SpanDraft

__all__ = ["export_line"]

#: OTLP's ``Span.SpanKind`` and ``Status.StatusCode`` values.
_KINDS = {CLIENT: 3}
_INTERNAL = 1
_STATUS_ERROR = 2
#: The resource and scope every line names, as JSON.
_RESOURCE = '{"attributes":[{"key":"service.name","value":{"stringValue":"evalhydra"}}]}'
_SCOPE = json.dumps({"name": "evalhydra", "version": __version__}, separators=(",", ":"))
#: A string as a JSON string, non-ASCII kept (the json module's C encoder).
_text = encode_basestring


def export_line(drafts: list[SpanDraft]) -> str:
    """One ``ExportTraceServiceRequest`` holding ``drafts``, as a line of OTLP JSON."""
    spans = ",".join(map(_span, drafts))
    scope = f'{{"scope":{_SCOPE},"spans":[{spans}]}}'
    return f'{{"resourceSpans":[{{"resource":{_RESOURCE},"scopeSpans":[{scope}]}}]}}'


def _span(d: SpanDraft) -> str:
    parts = [f'"traceId":"{d.trace_id:032x}","spanId":"{d.span_id:016x}"']
    if d.parent_id is not None:
        parts.append(f'"parentSpanId":"{d.parent_id:016x}"')
    parts.append(f'"name":{_text(d.name)},"kind":{_KINDS.get(d.kind, _INTERNAL)},'
                 f'"startTimeUnixNano":"{d.start_ns}","endTimeUnixNano":"{d.end_ns}",'
                 f'"attributes":{_attributes(d.attributes)}')
    if d.events:
        events = ",".join(f'{{"timeUnixNano":"{at}","name":{_text(name)},"attributes":{_attributes(attrs)}}}'
                          for name, attrs, at in d.events)
        parts.append(f'"events":[{events}]')
    status = f'{{"code":{_STATUS_ERROR},"message":{_text(d.error)}}}' if d.error else "{}"
    parts.append(f'"status":{status}')
    return "{" + ",".join(parts) + "}"


def _attributes(attributes: dict[str, Any]) -> str:
    return "[" + ",".join(f'{{"key":{_text(k)},"value":{_value(v)}}}' for k, v in attributes.items()) + "]"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return '{"boolValue":true}' if value else '{"boolValue":false}'
    if isinstance(value, int):
        return f'{{"intValue":"{value}"}}'
    if isinstance(value, float) and math.isfinite(value):
        return f'{{"doubleValue":{value!r}}}'
    if isinstance(value, list):  # a string array (finish reasons)
        return '{"arrayValue":{"values":[' + ",".join(map(_value, value)) + "]}}"
    return f'{{"stringValue":{_text(str(value))}}}'
