"""Fuzzing (hypothesis, bounded): mutated registry files and mutated replies never crash.

A mutated registry file either loads or raises the user-facing error naming the
file; a mutated reply is either an answer or an error the store records, never
an exception out of the service. (The subprocess catalogue in
``test_bad_inputs.py`` checks the exit code and the one ``error:`` line these
errors become.)
"""

from __future__ import annotations

import gzip
import json
import tempfile
import zlib
from pathlib import Path

import httpx
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalhydra.config.schema import RetryConfig, ServiceConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import ChatRequest, Completion
from evalhydra.registry.datasets import iter_cases
from evalhydra.registry.definitions import load_registry
from evalhydra.services.openai import OpenAICompatService
from tests.conftest import smoke_eval, write_registry

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_CASES = (
    '{"id": "c1", "input": "Say OK.", "ideal": "OK"}\n'
    '{"id": "c2", "input": [{"role": "user", "content": "Hi"}], "ideal": ["Hi", "Hello"]}\n'
    '{"id": "c3", "input": "Look.", "ideal": "x",'
    ' "attachments": [{"kind": "file", "path": "assets/a.txt"}]}\n'
)
_SERVICES = [{"name": "svc", "base_url": "http://127.0.0.1:9/v1/chat/completions", "default_model": "m",
              "timeout_ms": 1000, "retry": {"max_attempts": 2, "backoff_ms": 10, "retry_on_status": [429]}}]
_EVAL = smoke_eval(tools=[{"name": "t", "description": "d", "parameters_json": '{"type": "object"}'}])
_FILES = ("services.json", "evals/g/e.json", "data/g/e/test.jsonl")


@st.composite
def mutations(draw: st.DrawFn, size: int) -> list[tuple[int, bytes, int]]:
    """A few edits of a file of ``size`` bytes: (position, bytes to insert, bytes to delete)."""
    edit = st.tuples(st.integers(0, size), st.binary(max_size=4) | st.sampled_from([b'"', b"{", b"}", b",",
                                                                                   b"\\u", b"\xff", b"\n"]),
                     st.integers(0, 3))
    return draw(st.lists(edit, min_size=1, max_size=4))


def _mutate(data: bytes, edits: list[tuple[int, bytes, int]]) -> bytes:
    for position, insert, delete in edits:
        position = min(position, len(data))
        data = data[:position] + insert + data[position + delete:]
    return data


def _load_everything(root: Path) -> None:
    registry = load_registry(root)
    for spec in registry.evals.values():
        for _ in iter_cases(root, spec["dataset_path"]):
            pass


@FUZZ
@given(target=st.sampled_from(_FILES), data=st.data())
def test_a_mutated_registry_file_loads_or_names_itself_in_the_error(target: str, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = write_registry(Path(tmp) / "reg", evals={"g/e.json": _EVAL}, data={
            "data/g/e/test.jsonl": _CASES, "assets/a.txt": "text"}, services=_SERVICES)
        path = root / target
        original = path.read_bytes()
        path.write_bytes(_mutate(original, data.draw(mutations(len(original)))))
        try:
            _load_everything(root)
        except EvalHydraError as exc:
            first = exc.message.splitlines()[0]
            assert first.strip(), exc.message
            assert target.rsplit("/", 1)[-1] in exc.message or "attachment" in exc.message, exc.message


_REPLY = json.dumps({"id": "c1", "object": "chat.completion", "model": "served", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "OK", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "t", "arguments": "{\"q\": 1}"}}]},
     "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()


def _encoded(body: bytes, encoding: str) -> tuple[bytes, dict[str, str]]:
    if encoding == "gzip":
        return gzip.compress(body), {"content-encoding": "gzip"}
    if encoding == "gzip-truncated":
        return gzip.compress(body)[:-5], {"content-encoding": "gzip"}
    if encoding == "deflate":
        return zlib.compress(body), {"content-encoding": "deflate"}
    if encoding == "claimed-gzip":
        return body, {"content-encoding": "gzip"}
    return body, {}


@FUZZ
@given(status=st.sampled_from([200, 201, 400, 401, 429, 500, 503]), data=st.data(),
       encoding=st.sampled_from(["identity", "gzip", "gzip-truncated", "deflate", "claimed-gzip"]),
       content_type=st.sampled_from(["application/json", "text/html", "application/json; charset=latin-1"]))
def test_a_mutated_reply_is_an_answer_or_a_recorded_error(status: int, data: st.DataObject, encoding: str,
                                                          content_type: str) -> None:
    body = _mutate(_REPLY, data.draw(mutations(len(_REPLY))))
    wire, headers = _encoded(body, encoding)

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=wire, headers={"content-type": content_type, **headers})

    # rate_limit_timeout_s=0: a 429 is one failed attempt (the endpoint's waits are tested apart)
    config = ServiceConfig(name="svc", base_url="http://upstream.test", retry=RetryConfig(max_attempts=1),
                           rate_limit_timeout_s=0)

    async def call() -> Completion:
        service = OpenAICompatService(config, registry_root=Path("."), transport=httpx.MockTransport(reply))
        try:
            return await service.complete(ChatRequest(user_content="Say OK"))
        finally:
            await service.aclose()

    completion = trio.run(call)
    assert isinstance(completion, Completion)
    if completion.error_kind is None:
        assert 200 <= status < 300 and isinstance(completion.output, str)
    else:
        assert completion.output == "" and completion.error_message
