"""The batch queue's logic on trio's MockClock (issue 34): an hour-long batch polled every 30 s,
a provider that stops answering polls, splitting and the progress line; and the mock's Files and
Batches objects as the ``openai`` SDK parses them.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import openai
import pytest
import trio
import trio.testing

from evalhydra.config.schema import BatchConfig
from evalhydra.core.values import ErrorKind
from evalhydra.services.batch.api import BatchApi, api_base
from evalhydra.services.batch.outcomes import LineOutcome
from evalhydra.services.batch.queue import BatchQueue
from evalhydra.services.mock import MockServer, MockSettings
from evalhydra.store.batches import BatchLedger
from evalhydra.store.db import open_store


class InProcess:
    """An httpx transport into a MockServer's handler, counting calls by method and path."""

    def __init__(self, server: MockServer) -> None:
        self.server = server
        self.calls: list[str] = []
        self.refuse_polls = False
        self.second_poll = trio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path
        self.calls.append(f"{request.method} {request.url.path}")
        if sum(call.startswith("GET /v1/batches/") for call in self.calls) == 2:
            self.second_poll.set()
        if self.refuse_polls and request.method == "GET" and request.url.path.startswith("/v1/batches/"):
            return httpx.Response(503, json={"error": {"message": "down for maintenance"}})
        head = b"\r\n".join(
            [
                b"%s %s HTTP/1.1" % (request.method.encode(), path),
                *(b"%s: %s" % (k, v) for k, v in request.headers.raw),
            ]
        )
        body = await request.aread()
        reply = await self.server.handle(request.method.encode(), path, body, head)
        return httpx.Response(reply.status, content=reply.body, headers=list(reply.headers))


def body(n: int) -> bytes:
    return json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": f"Reply with exactly V{n}."}]}
    ).encode()


def make_queue(tmp_path: Path, transport: InProcess, **config: object) -> BatchQueue:
    open_store(tmp_path / "s.db").close()
    api = BatchApi("http://mock/v1", {}, transport=httpx.MockTransport(transport))
    return BatchQueue(
        api,
        BatchLedger(tmp_path / "s.db"),
        BatchConfig(enabled=True, **config),  # type: ignore[arg-type]
        service="svc",
        endpoint="http://mock/v1",
        run_id="r1",
        api_key_env=None,
        adopted=[],
    )


async def ask_all(queue: BatchQueue, ids: list[str], look_when: trio.Event | None = None,
                  seen: list[str] | None = None) -> dict[str, LineOutcome]:
    """Ask for every id at once; once ``look_when`` is set, note the run's batch status in ``seen``.

    The look waits for an event rather than a time: the clock autojumps while the ledger's
    thread writes, so no fixed time is sure to fall between the first poll and the last.
    """
    got: dict[str, LineOutcome] = {}

    async def one(i: int, custom_id: str) -> None:
        got[custom_id] = await queue.answer(custom_id, body(i))

    async def look() -> None:
        assert look_when is not None and seen is not None
        await look_when.wait()
        seen.append(queue.status())

    async with trio.open_nursery() as nursery:
        await nursery.start(queue.run)
        async with trio.open_nursery() as asking:
            for i, custom_id in enumerate(ids):
                asking.start_soon(one, i, custom_id)
            if look_when is not None:
                asking.start_soon(look)
        await queue.stop()
    return got


async def test_an_hour_long_batch_is_polled_every_interval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    server = MockServer(MockSettings(batch_delay_s=3600))
    transport = InProcess(server)
    queue = make_queue(tmp_path, transport, poll_interval_s=30)
    seen: list[str] = []
    # at the second poll the first one's answer is in: the progress line while it waits
    got = await ask_all(queue, ["a", "b", "c"], look_when=transport.second_poll, seen=seen)
    assert seen == ["batch svc: in progress 0/3"]
    assert trio.current_time() >= 3600
    assert {k: (v.status_code, v.error_kind) for k, v in got.items()} == {k: (200, None) for k in "abc"}
    assert json.loads(got["b"].body or b"{}")["choices"][0]["message"]["content"] == "V1"
    polls = sum(call.startswith("GET /v1/batches/") for call in transport.calls)
    assert polls == 3600 // 30  # every 30 s until it is done, never more often
    assert transport.calls[:2] == ["POST /v1/files", "POST /v1/batches"]
    assert transport.calls.count("DELETE " + transport.calls[-1].split(" ", 1)[1]) == 1  # files deleted


async def test_polls_refused_past_the_timeout_defer_the_cells(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    server = MockServer(MockSettings(batch_delay_s=60))
    transport = InProcess(server)
    transport.refuse_polls = True
    queue = make_queue(tmp_path, transport, poll_interval_s=30, poll_timeout_s=300)
    started = trio.current_time()
    got = await ask_all(queue, ["a", "b"])
    assert all(v.deferred and "down for maintenance" in (v.message or "") for v in got.values())
    assert trio.current_time() - started >= 300  # backed off for poll_timeout_s, then gave up
    assert sum(call.startswith("GET /v1/batches/") for call in transport.calls) < 40  # backing off
    (recorded,) = BatchLedger(tmp_path / "s.db").open_batches(["svc"])
    assert recorded.batch_id is not None and recorded.collected_at is None  # left for a rerun


async def test_failed_lines_are_named_and_the_progress_line_counts(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    server = MockServer(MockSettings(batch_fail_every=2))
    queue = make_queue(tmp_path, InProcess(server), poll_interval_s=5)
    got = await ask_all(queue, ["a", "b", "c", "d"])
    failed = {k for k, v in got.items() if v.error_kind is ErrorKind.BATCH_LINE_FAILED}
    assert len(failed) == 2 and all("500: mock: this line failed" in (got[k].message or "") for k in failed)
    assert queue.status() == "batch svc: completed 4/4"


def test_the_api_root_of_a_base_url() -> None:
    for url in ("http://h/v1", "http://h/v1/", "http://h/v1/chat/completions", "http://h"):
        assert api_base(url) == "http://h/v1"


def test_the_openai_sdk_reads_the_mocks_files_and_batches(url: str) -> None:
    client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
    lines = [
        {
            "custom_id": f"c{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": f"Reply with exactly V{i}."}]},
        }
        for i in range(3)
    ]
    upload = client.files.create(
        file=("in.jsonl", io.BytesIO("\n".join(map(json.dumps, lines)).encode())), purpose="batch"
    )
    assert (upload.purpose, upload.bytes, upload.object) == (
        "batch",
        len("\n".join(map(json.dumps, lines))),
        "file",
    )
    assert client.files.retrieve(upload.id).filename == "in.jsonl"
    batch = client.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"run": "r1"},
    )
    assert batch.status == "validating" and batch.metadata == {"run": "r1"}
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (3, 3, 0)
    assert done.output_file_id is not None
    output = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
    assert sorted(x["custom_id"] for x in output) == ["c0", "c1", "c2"]
    assert all(x["response"]["status_code"] == 200 for x in output)
    assert [b.id for b in client.batches.list(limit=10)] == [batch.id]
    assert client.batches.cancel(batch.id).status == "completed"  # too late to cancel
    assert client.files.delete(upload.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(upload.id)
