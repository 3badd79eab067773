"""The mock's chat completions: a request's fault drawn, and its reply built as that fault shapes it.

A plain request (no fault, stream, reasoning or tool wire asked for) is answered from a cache
keyed on its exact bytes, so repeated requests (trials, benches) skip parsing; every other
reply is built from the parsed request (:mod:`evalhydra.services.mock.replies`), as one body
or as server-sent events (:mod:`evalhydra.services.mock.streaming`).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from email.utils import formatdate
from functools import lru_cache
from typing import Any

from evalhydra.services.mock import responses, wire
from evalhydra.services.mock.replies import CHANCE_MARK, reply_for, usage_for
from evalhydra.services.mock.settings import MockSettings
from evalhydra.services.mock.stats import MockStats
from evalhydra.services.mock.streaming import (
    STREAM_FAULTS,
    finish_reason,
    stream_events,
    tool_wired,
    wire_set,
    with_reasoning,
)
from evalhydra.services.mock.tool_faults import heard
from evalhydra.services.mock.wire import Reply

__all__ = ["ChatAnswers", "parse_payload"]

_FAIL = responses.error_body("mock failure", "server_error")
_HTML = b"<html><body>502 Bad Gateway</body></html>"
_CACHE_MAX_BODY = 4 * 1024  # larger bodies are rendered afresh, never kept (the cache stays small)


class ChatAnswers:
    """Answers chat requests as the server's settings say, counting into its stats.

    Attributes:
        last_body: The last chat request's body that was answered (None before one).
    """

    def __init__(self, settings: Callable[[], MockSettings], stats: MockStats, rng: random.Random) -> None:
        self._settings = settings
        self.stats = stats
        self._rng = rng
        self._wire_rng = random.Random()  # tool_wire_rate's draws, apart so the replies' own stay put
        self.reseed(settings().seed)
        self._wires: frozenset[str] = frozenset()  # the request being answered: its tool_wire shapes
        self.last_body: bytes | None = None

    def reseed(self, seed: int) -> None:
        """Restart ``tool_wire_rate``'s draws from ``seed`` (the server reseeds the replies' own)."""
        self._wire_rng.seed(f"tool_wire:{seed}")

    @property
    def wires(self) -> frozenset[str]:
        """The ``tool_wire`` shapes drawn for the request answered last (none when spared)."""
        return self._wires

    @property
    def settings(self) -> MockSettings:
        """The server's settings, read afresh (a test may swap them at any time)."""
        return self._settings()

    def choose_fault(self, number: int) -> str | None:
        """Pick this request's fault: ``fail_first_n``, then ``fault``, then the rates."""
        s = self.settings
        draw = self._rng.random()
        if number <= s.fail_first_n:
            return "fail"
        if s.fault is not None:
            return s.fault
        for name, rate in (
            ("fail", s.fail_rate),
            ("hang", s.hang_rate),
            ("malformed", s.malformed_rate),
            ("reset", s.reset_rate),
            ("oversized", s.oversized_rate),
        ):
            if draw < rate:
                return name
            draw -= rate
        return None

    def answer(self, body: bytes, fault: str | None, number: int) -> Reply:
        """Build the reply of a chat request, shaped by its fault."""
        s = self.settings
        head = b'{"id":"chatcmpl-mock-%d","object":"chat.completion","created":%d,' % (
            number,
            int(time.time()),
        )
        self._wires = self._drawn_wires(s)
        if (fault is None and s.reasoning is None and s.tool_wire is None and not _wants_stream(body)
                and CHANCE_MARK not in body and not s.noisy_judge):
            rest = _rendered(body, s.model, s.fixed_reply)
            if rest is not None:
                self.last_body = body
                self.stats.ok += 1
                return Reply(200, head + rest)
        payload = parse_payload(body)
        if payload is None:
            self.stats.bad_requests += 1
            msg = responses.error_body("body must be a JSON object", "invalid_request_error")
            return Reply(400, msg)
        self.last_body = body
        streamed = bool(payload.get("stream"))
        if fault is not None and (streamed or fault not in STREAM_FAULTS):
            self.stats.faults[fault] = self.stats.faults.get(fault, 0) + 1
            if streamed:
                return self._streamed(payload, number, fault)
            return self._faulty(payload, fault, number)
        self.stats.ok += 1
        if not streamed:
            return Reply(200, self._body(payload, None, number))
        return self._streamed(payload, number, None)

    def _faulty(self, payload: dict[str, Any], fault: str, number: int) -> Reply:
        if fault == "fail":
            return Reply(self.settings.fail_status, _FAIL, self._fail_headers())
        if fault == "html":
            return Reply(200, _HTML, wire.HTML)
        if fault == "oversized":
            return Reply(200, responses.oversized_body(self._model(payload)))
        full = self._body(payload, fault, number)
        if fault in ("hang", "stall", "reset"):
            return Reply(200, full, action=fault)
        if fault == "malformed":
            return Reply(200, full[: len(full) // 2])
        return Reply(200, full)

    def _streamed(self, payload: dict[str, Any], number: int, fault: str | None) -> Reply:
        """A ``stream: true`` answer as server-sent events (a body fault such as ``hang`` or
        ``fail`` answers as it does a whole reply)."""
        if fault is not None and fault not in STREAM_FAULTS and fault != "no_usage":
            return self._faulty(payload, fault, number)
        s = self.settings
        message = self._message(payload, None)
        options = payload.get("stream_options")
        wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        usage = usage_for(payload, message) if wants_usage and fault != "no_usage" else None
        head = {"id": f"chatcmpl-mock-{number}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": self._model(payload)}
        self._shaped(message)
        events = stream_events(head, message, usage, delta_chars=s.stream_delta_chars, fault=fault,
                               wires=self._wires)
        if s.stream_split_bytes:
            whole = b"".join(events)
            events = [whole[i:i + s.stream_split_bytes] for i in range(0, len(whole), s.stream_split_bytes)]
        return Reply(200, b"", wire.EVENT_STREAM, action="cut" if fault == "stream_cut" else None,
                     events=events, event_delay_s=s.stream_delay_ms / 1000)

    def _drawn_wires(self, s: MockSettings) -> frozenset[str]:
        """This request's ``tool_wire`` shapes: all of them, or (``tool_wire_rate`` < 1) none for the
        requests the draw spares."""
        wires = wire_set(s.tool_wire)
        if wires and s.tool_wire_rate < 1.0 and self._wire_rng.random() >= s.tool_wire_rate:
            return frozenset()
        return wires

    def _shaped(self, message: dict[str, Any]) -> None:
        """Count a reply with tool calls that ``tool_wire`` shaped (``stats.faults['tool_wire']``)."""
        if self._wires and message.get("tool_calls"):
            self.stats.faults["tool_wire"] = self.stats.faults.get("tool_wire", 0) + 1

    def _model(self, payload: dict[str, Any]) -> str:
        model = payload.get("model") or self.settings.model
        return model if isinstance(model, str) else str(model)

    def _body(self, payload: dict[str, Any], fault: str | None, number: int) -> bytes:
        """Build a completion body shaped by a body fault (``missing_choices`` ...)."""
        message = self._message(payload, fault)
        usage = None if fault == "no_usage" else usage_for(payload, message)
        cid, created = f"chatcmpl-mock-{number}", int(time.time())
        wires = self._wires
        self._shaped(message)
        wired = tool_wired(message, wires)
        finish = finish_reason(wired, wires)
        body = responses.completion(cid, created, self._model(payload), wired, usage, finish)
        if fault == "missing_choices":
            del body["choices"]
        elif fault == "empty_choices":
            body["choices"] = []
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()

    def _message(self, payload: dict[str, Any], fault: str | None) -> dict[str, Any]:
        if fault == "content_null":
            return {"role": "assistant", "content": None}
        s = self.settings
        fixed = s.fixed_reply
        if fixed is not None:
            message = {"role": "assistant", "content": fixed}
        else:
            errors = (s.judge_sensitivity, s.judge_specificity) if s.noisy_judge else None
            message = reply_for(heard(payload, self._wires), self._rng.random, judge_errors=errors)
        shape = s.reasoning
        return message if shape is None else with_reasoning(message, payload, shape)

    def _fail_headers(self) -> tuple[tuple[bytes, bytes], ...]:
        s = self.settings
        if s.retry_after_s is None:
            return wire.JSON
        if s.retry_after_http_date:
            value = formatdate(time.time() + s.retry_after_s, usegmt=True)
        else:
            value = _seconds(s.retry_after_s)
        return (*wire.JSON, (b"retry-after", value.encode()))


def _seconds(value: float) -> str:
    """Format seconds for ``Retry-After`` ("2", "0.5")."""
    return str(int(value)) if value == int(value) else f"{value:g}"


def parse_payload(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def _wants_stream(body: bytes) -> bool:
    """Cheap pre-check: only bodies mentioning ``"stream"`` can ask for SSE."""
    return b'"stream"' in body and bool((parse_payload(body) or {}).get("stream"))


def _rendered(body: bytes, default_model: str, fixed_reply: str | None) -> bytes | None:
    """Return a plain completion's JSON after its ``id`` and ``created`` fields.

    Small bodies are cached on their exact bytes, so repeated requests (trials,
    benchmarks) skip parsing and reply computation. None when the body is not
    a JSON object.
    """
    if len(body) <= _CACHE_MAX_BODY:
        return _rendered_cached(body, default_model, fixed_reply)
    return _render(body, default_model, fixed_reply)


def _render(body: bytes, default_model: str, fixed_reply: str | None) -> bytes | None:
    payload = parse_payload(body)
    if payload is None:
        return None
    model = payload.get("model") or default_model
    model = model if isinstance(model, str) else str(model)
    if fixed_reply is not None:
        message: dict[str, Any] = {"role": "assistant", "content": fixed_reply}
    else:
        message = reply_for(payload)
    whole = responses.chat_body("", 0, model, message, usage_for(payload, message))
    return whole[whole.index(b'"model":') :]


#: Distinct bodies remembered: a bench cycles through its cases once per trial, and an LRU
#: smaller than that cycle would never hit (an entry is one small reply body).
_CACHE_ENTRIES = 4096
_rendered_cached = lru_cache(maxsize=_CACHE_ENTRIES)(_render)
