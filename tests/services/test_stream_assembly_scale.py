"""Issue 59, D5: assembling a streamed reply is linear in its deltas.

A hostile server on 127.0.0.1 answers a streamed chat request with one server-sent event that
holds 40,000 tool-call deltas (each a call of its own, or all pieces of one call); a real run with
``service.stream=true`` stores the cell in seconds, where the assembly was quadratic (24-35 s).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import numbered_registry, run_cli
from tests.loopback import loopback_http

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

DELTAS = 40_000


def _event(distinct: bool) -> bytes:
    calls = [{"index": i if distinct else 0, "id": f"call_{i}" if distinct or i == 0 else None,
              "type": "function", "function": {"name": "f" if distinct or i == 0 else None,
                                               "arguments": "{}" if distinct else ("{" if i == 0 else " ")}}
             for i in range(DELTAS)]
    if not distinct:
        calls.append({"index": 0, "function": {"arguments": "}"}})
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": calls},
                          "finish_reason": None}]}
    last = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    return (f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(last)}\n\ndata: [DONE]\n\n").encode()


@pytest.fixture(params=[True, False], ids=["distinct-calls", "one-call"])
def hostile_stream(request: pytest.FixtureRequest) -> Iterator[str]:
    body = _event(request.param)
    sse = [("content-type", "text/event-stream")]
    with loopback_http(lambda method, path, asked: (200, sse, body)) as url:
        yield url + "/v1"


def test_one_event_of_forty_thousand_tool_call_deltas_is_assembled_in_linear_time(
        hostile_stream: str, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 1)
    started = time.perf_counter()
    done = run_cli(f"registry={registry}", "eval=g.e", "service.mock.enabled=false",
                   f"service.base_url={hostile_stream}", "service.stream=true",
                   "service.retry.max_attempts=1",
                   f"store.path={tmp_path / 's.db'}", "run.progress=false", "report=[json]", cwd=tmp_path,
                   timeout=120)
    elapsed = time.perf_counter() - started
    assert done.returncode in (0, 1), done.stderr
    assert elapsed < 20, elapsed  # the run, start-up included; the assembly alone was 24-35 s
    db = sqlite3.connect(tmp_path / "s.db")
    (stored,) = db.execute("select count(*) from results").fetchone()
    db.close()
    assert stored == 1
