"""A stored cell as OpenTelemetry span drafts, and the ``traceparent`` its requests carry.

Each cell is one trace whose id is derived from the run and the cell's key, so the trace its
requests announced (:func:`traceparent`) is the trace evalhydra exports after the cell. The
root span is ``chat {model}`` for a single request, or ``invoke_agent {service}`` for a tool loop,
a conversation with a simulated user or an agent CLI; under it, a ``chat`` span per model request
(the user's too, marked ``evalhydra.side``) and an ``execute_tool {name}`` span per tool call,
in the order they happened. Their timings are the measured latencies laid end to end from the
cell's start, which the store keeps (the cell's end and latency), not each request's own clock.
The verdict is a ``gen_ai.evaluation.result`` event on the root span. Message content (inputs,
outputs, tool arguments and results, the verdict's explanation) is left out unless
``capture_content``; rows reach here with the run's secrets already masked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from evalhydra.store.rows import ResultRow
from evalhydra.telemetry import semconv as sc

__all__ = ["CellFacts", "SpanDraft", "baggage", "cell_spans", "run_span", "span_id", "trace_id",
           "traceparent"]

#: Span kinds, by name (the SDK's enum is the exporter's to pick).
CLIENT, INTERNAL = "client", "internal"
#: Agent CLIs: the provider is the CLI, not a model vendor.
_AGENT_KINDS = ("agent",)


@dataclass
class SpanDraft:
    """One span as it will be exported: ids as integers, times in nanoseconds since the epoch."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    kind: str = INTERNAL
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class CellFacts:
    """What the plan knows of a cell's eval: its matcher's kind and settings' fingerprint, and its
    judge as measured against people's labels before the run (sensitivity, specificity, labels)."""

    matcher: str
    fingerprint: str
    judge: tuple[float | None, float | None, int] | None = None


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()


def trace_id(run_id: str, cell_key: str) -> int:
    """The cell's trace id (128 bits, never 0)."""
    return int.from_bytes(_digest("trace", run_id, cell_key)[:16], "big") or 1


def span_id(run_id: str, cell_key: str, *where: str) -> int:
    """A span id of the cell (64 bits, never 0); the root's with no ``where``."""
    return int.from_bytes(_digest("span", run_id, cell_key, *where)[:8], "big") or 1


def traceparent(run_id: str, cell_key: str) -> str:
    """The W3C ``traceparent`` of the cell's root span, sampled."""
    return f"00-{trace_id(run_id, cell_key):032x}-{span_id(run_id, cell_key):016x}-01"


def baggage(run_id: str, case_id: str, trial: int) -> str:
    """The cell's W3C ``baggage``: its run, case and trial, which a system under test's
    ``BaggageSpanProcessor`` copies onto its own spans (so ``ingest otlp`` maps them back)."""
    entries = (("evalhydra.run_id", run_id), ("evalhydra.case_id", case_id), ("evalhydra.trial", str(trial)))
    return ",".join(f"{key}={quote(value, safe='')}" for key, value in entries)


def cell_spans(row: ResultRow, facts: CellFacts | None, *, capture_content: bool = False) -> list[SpanDraft]:
    """The spans of one stored cell: its root, then each request and tool call in order."""
    end = _ns(row.evaluated_at)
    start = end - int((row.latency_ms or 0) * 1e6)
    details = _details(row)
    trajectory = details.get("trajectory") if isinstance(details.get("trajectory"), dict) else None
    root = _root(row, trajectory, start, end, capture_content)
    children = _children(row, trajectory, root, capture_content)
    verdict = _verdict(row, facts, capture_content)
    root.events.append((sc.EVALUATION_EVENT, verdict, end))
    root.events += [(sc.EVALUATION_EVENT, part, end)
                    for part in _part_verdicts(verdict, details, capture_content)]
    return [root, *children]


def run_span(run_id: str, start_ns: int, end_ns: int, targets: list[dict[str, Any]]) -> SpanDraft:
    """The run as a span of its own trace: an ``evalhydra.target`` event per eval and target with
    its pass rate and 95 % interval (and the judge-corrected one, when a judge was calibrated)."""
    draft = SpanDraft(f"evalhydra run {run_id}", trace_id(run_id, ""), span_id(run_id, ""), None, start_ns,
                      max(end_ns, start_ns), INTERNAL, {"evalhydra.run_id": run_id,
                                                        "evalhydra.targets": len(targets)})
    for target in targets:
        shown = {f"evalhydra.{k}": v for k, v in target.items() if v is not None}
        draft.events.append(("evalhydra.target", shown, draft.end_ns))
    return draft


def _root(row: ResultRow, trajectory: dict[str, Any] | None, start: int, end: int,
          capture_content: bool) -> SpanDraft:
    agentic = trajectory is not None or row.kind in _AGENT_KINDS
    operation = "invoke_agent" if agentic else "chat"
    name = f"invoke_agent {row.service_name}" if agentic else f"chat {row.requested_model or row.model}"
    attributes = {sc.OPERATION: operation, sc.PROVIDER: _provider(row),
                  sc.REQUEST_MODEL: row.requested_model or row.model or "", "evalhydra.case_id": row.case_id,
                  "evalhydra.trial": int(row.run_index),
                  **_usage(row.prompt_tokens, row.completion_tokens, row.cached_tokens)}
    draft = SpanDraft(name, trace_id(row.run_id, row.cell_key), span_id(row.run_id, row.cell_key), None,
                      start, end, CLIENT, attributes, error=row.error_kind)
    if agentic:
        draft.attributes[sc.AGENT_NAME] = row.service_name
    else:  # one request: what its reply said of itself (an agent's requests are its chat spans)
        _reply(draft.attributes, row.reply_model, row.finish_reason, row.response_id, row.reasoning_tokens)
        if row.ttft_ms is not None:
            draft.attributes[sc.TIME_TO_FIRST_CHUNK] = row.ttft_ms / 1000
    if row.error_kind:
        draft.attributes[sc.ERROR_TYPE] = row.error_kind
    if capture_content:
        draft.attributes[sc.INPUT_MESSAGES] = _messages("user", row.input)
        draft.attributes[sc.OUTPUT_MESSAGES] = _messages("assistant", row.output)
    return draft


def _messages(role: str, content: Any) -> str:
    """Content as the conventions' messages JSON: ``[{role, parts: [{type: text, content}]}]``."""
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": _text(content or "")}]}],
                      ensure_ascii=False)


def _children(row: ResultRow, trajectory: dict[str, Any] | None, root: SpanDraft,
              capture_content: bool) -> list[SpanDraft]:
    """The requests and tool calls of a loop or conversation, laid end to end from the root's start."""
    if trajectory is None:
        return []
    calls: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for call in trajectory.get("tool_calls") or []:
        if isinstance(call, dict):
            calls.setdefault((call.get("side") or "agent", call.get("turn")), []).append(call)
    drafts: list[SpanDraft] = []
    clock = root.start_ns
    for index, turn in enumerate(t for t in trajectory.get("turns") or [] if isinstance(t, dict)):
        side = turn.get("side") or "agent"
        clock = _add(drafts, _request(row, root, turn, side, index, clock))
        for number, call in enumerate(calls.pop((side, turn.get("turn")), [])):
            clock = _add(drafts, _tool(row, root, call, f"{index}.{number}", clock, capture_content))
    return drafts


def _add(drafts: list[SpanDraft], draft: SpanDraft) -> int:
    drafts.append(draft)
    return draft.end_ns


def _request(row: ResultRow, root: SpanDraft, turn: dict[str, Any], side: str, index: int,
             start: int) -> SpanDraft:
    model = row.requested_model or row.model
    draft = SpanDraft(f"chat {model}", root.trace_id, span_id(row.run_id, row.cell_key, "turn", str(index)),
                      root.span_id, start, start + _latency_ns(turn), CLIENT,
                      {sc.OPERATION: "chat", sc.PROVIDER: _provider(row), sc.REQUEST_MODEL: model,
                       "evalhydra.side": side, "evalhydra.turn": int(turn.get("turn") or 0),
                       **_usage(turn.get("prompt_tokens"), turn.get("completion_tokens"),
                                turn.get("cached_tokens"))},
                      error=turn.get("error_kind"))
    _reply(draft.attributes, turn.get("model"), turn.get("finish_reason"), turn.get("response_id"),
           turn.get("reasoning_tokens"))
    if turn.get("error_kind"):
        draft.attributes[sc.ERROR_TYPE] = str(turn["error_kind"])
    return draft


def _reply(attributes: dict[str, Any], model: Any, finish_reason: Any, response_id: Any,
           reasoning_tokens: Any) -> None:
    """A chat span's attributes from its reply: the model, how it ended, its id, its thinking tokens."""
    if isinstance(model, str) and model:
        attributes[sc.RESPONSE_MODEL] = model
    if isinstance(finish_reason, str) and finish_reason:
        attributes[sc.FINISH_REASONS] = [finish_reason]
    if isinstance(response_id, str) and response_id:
        attributes[sc.RESPONSE_ID] = response_id
    if isinstance(reasoning_tokens, int) and not isinstance(reasoning_tokens, bool) and reasoning_tokens > 0:
        attributes[sc.REASONING_TOKENS] = reasoning_tokens


def _tool(row: ResultRow, root: SpanDraft, call: dict[str, Any], where: str, start: int,
          capture_content: bool) -> SpanDraft:
    name = str(call.get("name"))
    draft = SpanDraft(f"execute_tool {name}", root.trace_id, span_id(row.run_id, row.cell_key, "tool", where),
                      root.span_id, start, start + _latency_ns(call), INTERNAL,
                      {sc.OPERATION: "execute_tool", sc.TOOL_NAME: name, sc.TOOL_TYPE: "function",
                       sc.TOOL_CALL_ID: str(call.get("id") or ""),
                       "evalhydra.side": call.get("side") or "agent"},
                      error=call.get("error_kind"))
    if call.get("error_kind"):
        draft.attributes[sc.ERROR_TYPE] = str(call["error_kind"])
    original = str(call.get("original_name") or name)
    if original != name and ":" in original:  # an MCP server's tool: the MCP attributes join the span
        draft.attributes[sc.MCP_METHOD] = "tools/call"
        draft.attributes["evalhydra.mcp.server"] = original.split(":", 1)[0]
    if capture_content:
        draft.attributes[sc.TOOL_ARGUMENTS] = _text(call.get("arguments"))
        draft.attributes[sc.TOOL_RESULT] = _text(call.get("result"))
    return draft


def _verdict(row: ResultRow, facts: CellFacts | None, capture_content: bool) -> dict[str, Any]:
    """The ``gen_ai.evaluation.result`` event's attributes: the spec's and evalhydra's."""
    attributes: dict[str, Any] = {sc.EVALUATION_NAME: facts.matcher if facts else row.eval_id,
                                  **_identity(row)}
    if row.error_kind:
        attributes[sc.ERROR_TYPE] = row.error_kind
    else:
        attributes[sc.SCORE_LABEL] = "pass" if row.passed else "fail"
        if row.score is not None:
            attributes[sc.SCORE_VALUE] = float(row.score)
    if capture_content and row.failure_reason:
        attributes[sc.EXPLANATION] = row.failure_reason
    if row.response_id:  # the reply judged, as the spec names it
        attributes[sc.RESPONSE_ID] = row.response_id
    if facts is not None:
        attributes["evalhydra.matcher.fingerprint"] = facts.fingerprint
    if row.judge_service:
        attributes["evalhydra.judge.service"] = row.judge_service
        attributes["evalhydra.judge.model"] = row.judge_model or ""
        if facts is not None and facts.judge is not None:
            sensitivity, specificity, labels = facts.judge
            attributes["evalhydra.judge.labels"] = labels
            if sensitivity is not None:
                attributes["evalhydra.judge.sensitivity"] = sensitivity
            if specificity is not None:
                attributes["evalhydra.judge.specificity"] = specificity
    return attributes


def _part_verdicts(verdict: dict[str, Any], details: dict[str, Any],
                   capture_content: bool) -> list[dict[str, Any]]:
    """A composite matcher's parts (``all_of``, ``any_of``, ``weighted``: only they store
    ``details.parts``), each as a verdict of its own: named by its matcher, numbered by
    ``evalhydra.part`` and carrying the cell's identity, as the composite's own verdict does."""
    parts = details.get("parts")
    if not isinstance(parts, list):
        return []
    identity = {k: v for k, v in verdict.items() if k.startswith("evalhydra.") and not k.startswith(
        ("evalhydra.matcher.", "evalhydra.judge."))}
    found = []
    for index, part in enumerate(p for p in parts if isinstance(p, dict)):
        shown: dict[str, Any] = {sc.EVALUATION_NAME: str(part.get("kind")), **identity,
                                 "evalhydra.part": index, "evalhydra.composite": verdict[sc.EVALUATION_NAME]}
        if part.get("error_kind"):
            shown[sc.ERROR_TYPE] = str(part["error_kind"])
        else:
            shown[sc.SCORE_LABEL] = "pass" if part.get("passed") else "fail"
            if isinstance(part.get("score"), int | float):
                shown[sc.SCORE_VALUE] = float(part["score"])
        if capture_content and part.get("reason"):
            shown[sc.EXPLANATION] = str(part["reason"])
        if isinstance(part.get("weight"), int | float):
            shown["evalhydra.weight"] = float(part["weight"])
        found.append(shown)
    return found


def _identity(row: ResultRow) -> dict[str, Any]:
    """The cell as the verdict names it (the root span names its case and trial; the rest is here)."""
    return {"evalhydra.run_id": row.run_id, "evalhydra.eval_id": row.eval_id,
            "evalhydra.case_id": row.case_id, "evalhydra.trial": int(row.run_index),
            "evalhydra.cell_key": row.cell_key}


def _usage(prompt: Any, completion: Any, cached: Any) -> dict[str, int]:
    found = {sc.INPUT_TOKENS: prompt, sc.OUTPUT_TOKENS: completion, sc.CACHE_READ_TOKENS: cached}
    return {k: int(v) for k, v in found.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _provider(row: ResultRow) -> str:
    """The spec's provider name: ``openai`` for an OpenAI-compatible API, else the service."""
    return row.service_name if row.kind in _AGENT_KINDS else "openai"


def _details(row: ResultRow) -> dict[str, Any]:
    """The row's details as a mapping ({} when it has none or they are not JSON)."""
    details = row.details
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except ValueError:
            return {}
    return details if isinstance(details, dict) else {}


def _latency_ns(entry: dict[str, Any]) -> int:
    latency = entry.get("latency_ms")
    return int(latency * 1e6) if isinstance(latency, int | float) and latency > 0 else 0


def _ns(stamp: str | None) -> int:
    if not stamp:
        return 0
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000  # no float rounding


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
