"""Issue 60, items 3 and 8: a zig_eval-layout registry reads tool-call replies as zig_eval does;
evalhydra's own evals (and tool loops) keep the tolerance for ``""`` and object arguments.

A server on 127.0.0.1 answers each case with the tool call its input names: arguments sent as
``""``, as a JSON object, or as a proper JSON string. The stored ``tool_calls.arguments`` are
exactly what it sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evalhydra
from tests.conftest import smoke_eval, write_registry
from tests.loopback import loopback_http

ARGUMENTS: dict[str, Any] = {"empty": "", "object": {"city": "Oslo"}, "text": '{"city": "Oslo"}'}
EXPECTED = [{"name": "weather", "arguments_json": '{"city": "Oslo"}'}]


def _answer(method: str, path: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    del method, path
    arguments = ARGUMENTS[json.loads(body)["messages"][-1]["content"]]
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": arguments}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    reply = {"id": "x", "object": "chat.completion", "model": "m",
             "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    return 200, [("content-type", "application/json")], json.dumps(reply).encode()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with loopback_http(_answer) as url:
        yield url + "/v1"


def _dataset() -> str:
    return "".join(json.dumps({"id": kind, "input": kind, "expected_tool_calls": EXPECTED}) + "\n"
                   for kind in ARGUMENTS)


def _rows(root: Path, server: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    result = evalhydra.evaluate([f"registry={root}", "eval=g.e", "service.mock.enabled=false",
                                 f"service.base_url={server}", f"store.path={tmp_path / 's.db'}"])
    return {row["case_id"]: row for row in result.rows()}


def test_a_zig_eval_registry_gives_zig_evals_verdicts(server: str, tmp_path: Path) -> None:
    root = write_registry(tmp_path / "zig", evals={"g/e.json": smoke_eval(matcher={"kind": "tool_call"})},
                          data={"data/g/e/test.jsonl": _dataset()})
    rows = _rows(root, server, tmp_path)
    assert rows["text"]["passed"] == 1
    assert (rows["empty"]["passed"], rows["empty"]["failure_reason"]) == (0, "invalid arguments json")
    assert rows["empty"]["error_kind"] is None  # a wrong answer, as zig_eval scores it
    assert json.loads(rows["empty"]["tool_calls"]) == [{"name": "weather", "arguments": ""}]
    assert (rows["object"]["error_kind"], rows["object"]["failure_reason"]) == (
        "invalid_response", "MalformedSuccessPayload")


def test_own_evals_read_empty_and_object_arguments_as_servers_mean_them(server: str, tmp_path: Path) -> None:
    root = tmp_path / "own"
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "e.yaml").write_text("id: g.e\ndataset_path: data.jsonl\nmatcher: {kind: tool_call}\n")
    (root / "evals" / "data.jsonl").write_text(_dataset())
    rows = _rows(root, server, tmp_path)
    assert rows["text"]["passed"] == 1 and rows["object"]["passed"] == 1
    assert rows["empty"]["failure_reason"] == "missing expected argument field"  # "" means {}
    stored = {case: json.loads(row["tool_calls"])[0] for case, row in rows.items()}
    assert stored["empty"] == {"name": "weather", "arguments": ""}  # kept exactly as sent
    assert stored["object"] == {"name": "weather", "arguments": '{"city": "Oslo"}', "arguments_object": True}


def test_strict_arguments_is_checked(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "e.yaml").write_text(
        "id: g.e\ndataset_path: data.jsonl\nmatcher: {kind: tool_call, strict_arguments: sure}\n")
    (tmp_path / "evals" / "data.jsonl").write_text(_dataset())
    with pytest.raises(evalhydra.EvalHydraError, match="strict_arguments: Value 'sure' is not a valid bool"):
        evalhydra.evaluate([f"registry={tmp_path}", "eval=g.e", f"store.path={tmp_path / 's.db'}"])
