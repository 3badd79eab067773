"""A reasoning model's thinking is taken out of its answer before scoring (issue 35, item 1).

A real HTTP server on loopback (the standard library's, in a thread) answers each case in one
of the shapes servers use: ``reasoning_content``, ``reasoning``, a leading ``<think>`` block, a
closing ``</think>`` alone, and thinking cut before any answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import evalhydra
from evalhydra.core.values import NOT_FINISHED
from evalhydra.services.openai.reasoning import split_reasoning
from tests.conftest import smoke_eval, write_registry
from tests.helpers import mock_call

SHAPES: dict[str, dict[str, object]] = {
    "separate": {"content": "Paris", "reasoning_content": "The capital of France is Paris."},
    "llama": {"content": "Paris", "reasoning": "France's capital: Paris."},
    "inline": {"content": "<think>\nFrance... Paris.\n</think>\n\nParis"},
    "closing": {"content": "France... Paris.\n</think>\nParis"},
    "cut": {"content": "<think>\nFrance, hmm, let me think about"},
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        shape = json.loads(body)["messages"][-1]["content"].split()[-1]
        message = {"role": "assistant", **SHAPES[shape]}
        usage = {"prompt_tokens": 9, "completion_tokens": 40,
                 "completion_tokens_details": {"reasoning_tokens": 31}}
        reply = json.dumps({"model": "r1", "choices": [{"message": message, "finish_reason": "stop"}],
                            "usage": usage}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def thinking_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _run(url: str, tmp_path: Path, *extra: str) -> dict[str, dict[str, object]]:
    lines = "".join(json.dumps({"id": shape, "input": f"Capital of France? {shape}", "ideal": "Paris"}) + "\n"
                    for shape in SHAPES)
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval("g.e")},
                              data={"data/g/e/test.jsonl": lines})
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                                 "service.mock.enabled=false", f"service.base_url={url}",
                                 f"store.path={tmp_path / 's.db'}", *extra])
    return {r["case_id"]: r for r in result.rows()}


def test_every_shape_of_thinking_is_kept_apart_from_the_scored_answer(thinking_url: str,
                                                                       tmp_path: Path) -> None:
    rows = _run(thinking_url, tmp_path)
    for shape in ("separate", "llama", "inline", "closing"):
        row = rows[shape]
        assert (row["output"], row["passed"]) == ("Paris", 1), shape  # exact_match scores the answer only
        assert "Paris" in str(row["reasoning"]) and "<think>" not in str(row["reasoning"]), shape
        assert (row["reasoning_tokens"], row["completion_tokens"]) == (31, 40)
    cut = rows["cut"]
    assert (cut["passed"], cut["status"], cut["failure_reason"]) == (0, "FAIL", NOT_FINISHED)
    assert cut["error_kind"] is None and "let me think" in str(cut["reasoning"])


def test_parsing_can_be_turned_off(thinking_url: str, tmp_path: Path) -> None:
    rows = _run(thinking_url, tmp_path, "service.reasoning.parse=false")
    assert rows["inline"]["passed"] == 0 and rows["inline"]["output"].startswith("<think>")  # type: ignore[union-attr]
    assert rows["separate"]["passed"] == 1 and rows["separate"]["reasoning"] is None


def test_custom_tags_and_text_without_thinking() -> None:
    tags = ("<reason>", "</reason>")
    assert split_reasoning({}, "<reason>a</reason> b", tags).answer == "b"
    plain = split_reasoning({}, "just an answer", tags)
    assert (plain.answer, plain.reasoning, plain.finished) == ("just an answer", None, True)
    mid = "x <think>y</think> z"  # a block that does not lead is part of the answer
    assert split_reasoning({}, mid, ("<think>", "</think>")).answer == mid


def test_the_page_shows_the_thinking_under_the_answer(thinking_url: str, tmp_path: Path) -> None:
    from evalhydra.reports.writer import write_run_reports
    from evalhydra.store.db import open_store

    rows = _run(thinking_url, tmp_path)
    store = open_store(tmp_path / "s.db", read_only=True)
    write_run_reports(store, [str(rows["inline"]["run_id"])], tmp_path / "page", formats=["html"],
                      cumulative=False)
    store.close()
    page = (tmp_path / "page" / "report.html").read_text()
    assert "<details><summary>reasoning</summary>" in page and '"rz":"France... Paris."' in page


def _graded(url: str, tmp_path: Path, *extra: str) -> dict[str, object]:
    """One case graded by a model_grade judge (the same mock process), and the judge's request."""
    mock_call(url, "config", {"reasoning": "inline"})
    grade = smoke_eval("g.e", matcher={"kind": "model_grade", "judge_service": "mock",
                                       "rubric": "The answer names the capital."})
    case = '{"id": "c", "input": "Reply with exactly Paris."}\n'
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": grade}, data={"data/g/e/test.jsonl": case})
    evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
                        f"service.base_url={url}", f"store.path={tmp_path / 's.db'}", *extra])
    return mock_call(url, "last")


def test_a_judge_sees_the_answer_and_the_thinking_only_when_asked(url: str, tmp_path: Path) -> None:
    prompt = _graded(url, tmp_path / "answer")["messages"][-1]["content"]  # type: ignore[index]
    assert "Candidate output:\nParis\n" in prompt and "The user asks" not in prompt
    shown = _graded(url, tmp_path / "thinking", "judge.include_reasoning=true")
    prompt = shown["messages"][-1]["content"]  # type: ignore[index]
    assert "[The candidate's reasoning, before its answer]\nThe user asks" in prompt
    assert "[Its answer]\nParis\n" in prompt
