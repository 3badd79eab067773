"""The mock's Files and Batches API: ``/v1/files`` and ``/v1/batches`` as OpenAI shapes them.

A batch is processed lazily: the first read after ``batch_delay_s`` (trio's clock,
so a test's MockClock drives it) answers every line with the mock's own chat
logic, writes the output and error files in shuffled order, and moves the batch
to its final status. The settings shape the end:

* ``batch_fail_every=n``: every n-th line goes to the error file (a 500 from the model);
* ``batch_outcome=expired``: only the first half of the lines are answered, the batch ``expired``;
* ``batch_outcome=failed``: validation fails, no line is answered;
* ``batch_outcome=stuck``: the batch stays ``in_progress`` until cancelled.

State lives in memory: a new mock knows no earlier batch (its reads answer 404).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

import trio

from evalhydra.services import responses_api
from evalhydra.services.mock import responses

__all__ = ["BATCH_OUTCOMES", "MockBatches"]

#: How ``batch_outcome`` may end every batch.
BATCH_OUTCOMES = ("expired", "failed", "stuck")

#: Answers one chat body: (status, reply body).
ChatAnswer = Callable[[bytes], tuple[int, bytes]]

_NOT_FOUND = (404, {"error": {"message": "No such object", "type": "invalid_request_error",
                              "code": "not_found"}})


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.content), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "expires_at": None, "status_details": None}


@dataclass
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None
    created_at: int
    ready_at: float  # trio time when it is processed
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    times: dict[str, int | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        stamps = ("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at",
                  "cancelling_at", "cancelled_at")
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint,
                "errors": None if self.errors is None else {"object": "list", "data": self.errors},
                "input_file_id": self.input_file_id, "completion_window": self.completion_window,
                "status": self.status, "output_file_id": self.output_file_id,
                "error_file_id": self.error_file_id, "created_at": self.created_at,
                "expires_at": self.created_at + 86400,
                **{name: self.times.get(name) for name in stamps},
                "request_counts": dict(self.counts), "metadata": self.metadata}


class MockBatches:
    """The files and batches of one mock server."""

    def __init__(self, answer: ChatAnswer, settings: Callable[[], Any]) -> None:
        self._answer = answer
        self._read_settings = settings  # the server's settings, read afresh (they may change)
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self._ids = 0

    @property
    def _settings(self) -> Any:
        return self._read_settings()

    def route(self, method: bytes, path: bytes, query: bytes, body: bytes,
              content_type: str) -> tuple[int, Any] | None:
        """Answer a files or batches request: (status, JSON object or raw bytes); None for another path."""
        parts = path.removeprefix(b"/v1").strip(b"/").decode("ascii", "replace").split("/")
        if parts[0] == "files":
            return self._files(method, parts[1:], body, content_type)
        if parts[0] == "batches":
            return self._batches(method, parts[1:], body, query)
        return None

    # -- files ----------------------------------------------------------------

    def _files(self, method: bytes, rest: list[str], body: bytes, content_type: str) -> tuple[int, Any]:
        if not rest and method == b"POST":
            return self._upload(body, content_type)
        if not rest and method == b"GET":
            listed = [f.to_dict() for f in self.files.values()]
            return 200, {"object": "list", "data": listed, "has_more": False}
        found = self.files.get(rest[0]) if rest else None
        if found is None:
            return _NOT_FOUND
        if len(rest) == 2 and rest[1] == "content" and method == b"GET":
            return 200, found.content
        if len(rest) == 1 and method == b"GET":
            return 200, found.to_dict()
        if len(rest) == 1 and method == b"DELETE":
            del self.files[found.id]
            return 200, {"id": found.id, "object": "file", "deleted": True}
        return _NOT_FOUND

    def _upload(self, body: bytes, content_type: str) -> tuple[int, Any]:
        fields = _multipart(body, content_type)
        upload = fields.get("file")
        if upload is None or "purpose" not in fields:
            return 400, _invalid("a multipart body with 'file' and 'purpose' is required")
        name, content = upload
        made = self._new_file(name or "upload.jsonl", fields["purpose"][1].decode(), content)
        return 200, made.to_dict()

    def _new_file(self, filename: str, purpose: str, content: bytes) -> _File:
        made = _File(self._new_id("file"), filename, purpose, content, int(time.time()))
        self.files[made.id] = made
        return made

    # -- batches --------------------------------------------------------------

    def _batches(self, method: bytes, rest: list[str], body: bytes, query: bytes) -> tuple[int, Any]:
        if not rest and method == b"POST":
            return self._create(body)
        if not rest and method == b"GET":
            return 200, self._list(query)
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None:
            return _NOT_FOUND
        self._advance(batch)
        if len(rest) == 2 and rest[1] == "cancel" and method == b"POST":
            if batch.status in ("validating", "in_progress", "finalizing"):
                batch.status = "cancelled"
                batch.times["cancelling_at"] = batch.times["cancelled_at"] = int(time.time())
            return 200, batch.to_dict()
        if len(rest) == 1 and method == b"GET":
            return 200, batch.to_dict()
        return _NOT_FOUND

    def _create(self, body: bytes) -> tuple[int, Any]:
        try:
            request = json.loads(body)
        except ValueError:
            return 400, _invalid("body must be JSON")
        if not isinstance(request, dict) or request.get("input_file_id") not in self.files:
            return 400, _invalid("input_file_id names no uploaded file")
        if request.get("endpoint") not in ("/v1/chat/completions", "/v1/responses"):
            return 400, _invalid("the mock batches /v1/chat/completions and /v1/responses only")
        batch = _Batch(self._new_id("batch"), request["input_file_id"], request["endpoint"],
                       str(request.get("completion_window", "24h")), request.get("metadata"),
                       int(time.time()), trio.current_time() + self._settings.batch_delay_s)
        batch.counts["total"] = len(self.files[batch.input_file_id].content.splitlines())
        self.batches[batch.id] = batch
        return 200, batch.to_dict()

    def _line_answer(self, batch: _Batch, request: dict[str, Any]) -> tuple[int, bytes]:
        """One line's answer by the chat logic; a ``/v1/responses`` batch's read and answered as the
        Responses API's."""
        if batch.endpoint != "/v1/responses":
            return self._answer(json.dumps(request).encode())
        status, body = self._answer(json.dumps(responses_api.chat_request(request)).encode())
        if status != 200:
            return status, body
        reply = responses_api.responses_reply(json.loads(body), f"resp_{batch.id}", int(time.time()))
        return status, json.dumps(reply).encode()

    def _list(self, query: bytes) -> dict[str, Any]:
        params = dict(p.split("=", 1) for p in query.decode().split("&") if "=" in p)
        listed = sorted(self.batches.values(), key=lambda b: b.id, reverse=True)  # newest first
        if "after" in params:
            listed = [b for b in listed if b.id < params["after"]]
        limit = int(params.get("limit", 20))
        page = listed[:limit]
        for batch in page:
            self._advance(batch)
        return {"object": "list", "data": [b.to_dict() for b in page],
                "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None,
                "has_more": len(listed) > limit}

    def _advance(self, batch: _Batch) -> None:
        """Process ``batch`` once its time has come (a ``stuck`` batch never is)."""
        if batch.status not in ("validating", "in_progress"):
            return
        now = int(time.time())
        batch.times["in_progress_at"] = batch.times.get("in_progress_at") or now
        outcome = self._settings.batch_outcome
        if trio.current_time() < batch.ready_at or outcome == "stuck":
            batch.status = "in_progress"
            return
        if outcome == "failed":
            batch.status, batch.times["failed_at"] = "failed", now
            batch.errors = [{"code": "invalid_request", "message": "mock: the batch failed validation",
                             "param": None, "line": 1}]
            return
        lines = self.files[batch.input_file_id].content.splitlines()
        self._process(batch, lines[: len(lines) // 2] if outcome == "expired" else lines)
        batch.status = "expired" if outcome == "expired" else "completed"
        batch.times["finalizing_at"] = now
        batch.times["expired_at" if outcome == "expired" else "completed_at"] = now

    def _process(self, batch: _Batch, lines: list[bytes]) -> None:
        """Answer ``lines``; write the output and error files in shuffled order."""
        every = self._settings.batch_fail_every
        done: list[bytes] = []
        failed: list[bytes] = []
        for number, raw in enumerate(lines, start=1):
            line = json.loads(raw)
            request_id = f"req_mock_{batch.id}_{number}"
            if every and number % every == 0:
                error = json.loads(responses.error_body("mock: this line failed", "server_error"))
                failed.append(_line(batch, number, line["custom_id"], 500, request_id, error))
                continue
            status, body = self._line_answer(batch, line["body"])
            target = done if status == 200 else failed
            target.append(_line(batch, number, line["custom_id"], status, request_id, json.loads(body)))
        order = random.Random(self._settings.seed + len(self.batches))
        order.shuffle(done)
        order.shuffle(failed)
        batch.counts["completed"], batch.counts["failed"] = len(done), len(failed)
        if done:
            batch.output_file_id = self._new_file(f"{batch.id}_output.jsonl", "batch_output",
                                                  b"\n".join(done) + b"\n").id
        if failed:
            batch.error_file_id = self._new_file(f"{batch.id}_error.jsonl", "batch_output",
                                                 b"\n".join(failed) + b"\n").id

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}_mock{self._ids:06d}{random.getrandbits(32):08x}"


def _line(batch: _Batch, number: int, custom_id: str, status: int, request_id: str,
          body: dict[str, Any]) -> bytes:
    """One line of an output or error file."""
    # a request answered with an error status is in the error file with its response, as OpenAI has it
    error = None
    return json.dumps({"id": f"batch_req_{batch.id}_{number}", "custom_id": custom_id,
                       "response": {"status_code": status, "request_id": request_id, "body": body},
                       "error": error}).encode()


def _invalid(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


def _multipart(body: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's fields: name -> (filename, content)."""
    head = b"Content-Type: " + content_type.encode() + b"\r\n\r\n"
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    fields: dict[str, tuple[str | None, bytes]] = {}
    if not message.is_multipart():
        return fields
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if name:
            fields[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields
