"""Issue 59, D8 and D18: Responses API objects that are no finished answer, or hold values of the
wrong JSON types, are invalid responses naming why, never a model's FAIL or a crashed cell; an
``error`` event's message is kept. A hostile server on 127.0.0.1 sends each body to a real run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import numbered_registry, run_cli
from tests.loopback import loopback_http

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

DONE = {"id": "resp_1", "object": "response", "model": "m", "status": "completed"}
MESSAGE = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "V0"}]}

BODIES = {
    "no output": ({**DONE}, "the response's output is not a list of items"),
    "output as text": ({**DONE, "output": "V0"}, "the response's output is not a list of items"),
    "in progress": ({**DONE, "status": "in_progress", "output": []}, "the response is 'in_progress'"),
    "queued": ({**DONE, "status": "queued", "output": []}, "the response is 'queued'"),
    "cancelled": ({**DONE, "status": "cancelled", "output": [MESSAGE]}, "the response is 'cancelled'"),
    "text as a number": ({**DONE, "output": [{**MESSAGE, "content": [{"type": "output_text", "text": 7}]}]},
                         "a value of the response has the wrong type"),
    "usage details as text": ({**DONE, "output": [MESSAGE], "usage": {"input_tokens": 1, "output_tokens": 1,
                                                                       "input_tokens_details": "x"}},
                              "a value of the response has the wrong type"),
}
STREAM_ERROR = (b'event: response.created\ndata: {"type": "response.created", "response": {"id": "r",'
                b' "object": "response", "status": "in_progress", "output": []}}\n\n'
                b'event: error\ndata: {"type": "error", "code": "server_overloaded",'
                b' "message": "the upstream is overloaded", "param": null}\n\n')


def _stored(tmp_path: Path, url: str, *extra: str) -> tuple[str, str | None, str | None]:
    registry = numbered_registry(tmp_path / "reg", 1)
    done = run_cli(f"registry={registry}", "eval=g.e", "service.mock.enabled=false",
                   f"service.base_url={url}", "service.api=responses", "service.retry.max_attempts=1",
                   "run.fail_fast=false",
                   f"store.path={tmp_path / 's.db'}", "run.progress=false", "report=[json]", *extra,
                   cwd=tmp_path, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    db = sqlite3.connect(tmp_path / "s.db")
    row = db.execute("select status, error_kind, failure_reason from results").fetchone()
    db.close()
    return row


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_response_that_is_no_finished_answer_is_an_invalid_response(tmp_path: Path, name: str) -> None:
    body, said = BODIES[name]
    with loopback_http(lambda method, path, asked: (200, [("content-type", "application/json")],
                                                    json.dumps(body).encode())) as url:
        status, kind, message = _stored(tmp_path, url + "/v1")
    assert (status, kind) == ("ERROR", "invalid_response"), (status, kind, message)
    assert message is not None and said in message, message


def test_a_streamed_error_event_keeps_its_message(tmp_path: Path) -> None:
    with loopback_http(lambda method, path, asked: (200, [("content-type", "text/event-stream")],
                                                    STREAM_ERROR)) as url:
        status, kind, message = _stored(tmp_path, url + "/v1", "service.stream=true")
    assert (status, kind) == ("ERROR", "invalid_response")
    assert message is not None and "server_overloaded: the upstream is overloaded" in message, message
