"""Streaming endpoints end to end (issue 35, items 3–5): ``service.stream=true`` against the
built-in mock, over both transports.

A streamed answer scores and stores what the same request answers whole: the output, the
thinking in each of its three shapes, tool calls and tokens; it adds the time to the first
token and to the answer. A stream that is not a whole answer is an infrastructure error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import evalhydra
from tests.helpers import run_cli

#: Columns a streamed answer must share with the whole one.
SAME = ("case_id", "run_index", "output", "reasoning", "passed", "status", "tool_calls", "prompt_tokens",
        "completion_tokens", "reasoning_tokens", "reply_model")


def run(tmp_path: Path, name: str, *overrides: str) -> list[dict[str, Any]]:
    result = evalhydra.evaluate(["service=mock", f"store.path={tmp_path / name}.db",
                                 f"hydra.run.dir={tmp_path / name}", *overrides])
    return sorted(result.rows(), key=lambda r: (r["eval_id"], r["case_id"], r["run_index"]))


def both_evals(tmp_path: Path, name: str, *overrides: str) -> list[dict[str, Any]]:
    """The smoke eval's answers and a tool eval's tool calls."""
    return [*run(tmp_path, f"{name}-smoke", "eval=smoke", *overrides),
            *run(tmp_path, f"{name}-tools", "eval=tools.search_web", *overrides)]


@pytest.mark.parametrize(("shape", "transport"), [
    (None, "lean"), pytest.param(None, "httpx", marks=pytest.mark.slow),
    pytest.param("reasoning_content", "lean", marks=pytest.mark.slow),
    pytest.param("reasoning", "lean", marks=pytest.mark.slow),
    pytest.param("inline", "httpx", marks=pytest.mark.slow)])
def test_a_streamed_answer_equals_the_whole_one(shape: str | None, transport: str, tmp_path: Path) -> None:
    thinking = [] if shape is None else [f"service.mock.reasoning={shape}"]
    common = ["trials=2", f"service.transport={transport}", *thinking]
    whole = both_evals(tmp_path, "whole", *common)
    # three bytes a piece: events, lines and UTF-8 sequences arrive split across reads
    streamed = both_evals(tmp_path, "streamed", *common, "service.stream=true",
                          "service.mock.stream_split_bytes=3")
    assert len(whole) == len(streamed) == 6
    assert [[r[c] for c in SAME] for r in streamed] == [[r[c] for c in SAME] for r in whole]
    assert all(r["passed"] == 1 for r in streamed)
    assert any(r["tool_calls"] not in (None, "[]") for r in streamed)  # tool-call deltas were joined
    if shape is not None:
        assert all("The user asks" in str(r["reasoning"]) and r["reasoning_tokens"] for r in streamed)
    for row in streamed:
        assert row["ttft_ms"] is not None and row["ttft_ms"] <= row["latency_ms"] + 1
        assert row["first_answer_ms"] is not None and row["first_answer_ms"] >= row["ttft_ms"]
    assert all(r["ttft_ms"] is None and r["first_answer_ms"] is None for r in whole)


def test_utf8_split_across_pieces_arrives_whole(tmp_path: Path) -> None:
    text = "Grüße — 日本語 ✓ 🙂"
    whole = run(tmp_path, "whole", "eval=smoke.reply_ok", f"service.mock.fixed_reply='{text}'")
    streamed = run(tmp_path, "streamed", "eval=smoke.reply_ok", f"service.mock.fixed_reply='{text}'",
                   "service.stream=true", "service.mock.stream_split_bytes=1")  # every byte its own chunk
    assert [r["output"] for r in streamed] == [r["output"] for r in whole] == [text, text]


def test_thinking_delays_the_answer_but_not_the_first_token(tmp_path: Path) -> None:
    """Events 20 ms apart: the first token comes with the thinking, the answer after all of it."""
    rows = run(tmp_path, "r", "eval=smoke", "service.stream=true", "service.mock.reasoning=reasoning_content",
               "service.mock.stream_delay_ms=20", "service.mock.stream_delta_chars=16")
    for row in rows:
        thought_deltas = -(-len(row["reasoning"]) // 16)
        assert row["first_answer_ms"] - row["ttft_ms"] >= 20 * thought_deltas * 0.9
        assert row["output_tps"] is not None and row["output_tps"] > 0


@pytest.mark.parametrize(("fault", "reason"), [
    # the connection closes mid-body: the transport says so
    ("stream_cut", r"^RemoteProtocolError"),
    ("stream_error", r"^StreamError: mock stream error"),
    pytest.param("stream_early_done", r"^StreamUnfinished", marks=pytest.mark.slow)])
def test_a_stream_that_ends_badly_is_an_infrastructure_error(fault: str, reason: str, tmp_path: Path,
                                                              wire: str) -> None:
    rows = run(tmp_path, "r", "eval=smoke", "service.stream=true", f"service.mock.fault={fault}",
               "service.retry.max_attempts=1")
    assert len(rows) == 2
    for row in rows:
        assert row["error_kind"] is not None
        assert re.search(reason, str(row["failure_reason"])), row["failure_reason"]
        assert row["status"] != "FAIL" and not row["passed"]  # never scored as a wrong answer


def test_a_stream_without_a_usage_chunk_leaves_the_tokens_unknown(tmp_path: Path) -> None:
    rows = run(tmp_path, "r", "eval=smoke", "service.stream=true", "service.mock.fault=no_usage")
    assert rows and all(r["passed"] == 1 for r in rows)
    assert all((r["prompt_tokens"], r["completion_tokens"], r["output_tps"]) == (None, None, None)
               for r in rows)


def test_the_timeout_bounds_the_whole_stream(tmp_path: Path, wire: str) -> None:
    """Each event arrives in time, but the stream as a whole takes longer than timeout_ms."""
    rows = run(tmp_path, "r", "eval=smoke.reply_ok", "trials=1", "service.stream=true",
               "service.mock.stream_delay_ms=100", "service.mock.stream_delta_chars=1",
               "service.timeout_ms=300", "service.retry.max_attempts=1")
    assert [r["error_kind"] for r in rows] == ["timeout", "timeout"]  # 5 events or more, 100 ms apart


@pytest.mark.slow
def test_reports_and_compare_show_time_to_first_token_and_thinking(tmp_path: Path) -> None:
    common = ["eval=smoke", "trials=3", "service.stream=true", "service.mock.reasoning=reasoning_content",
              f"store.path={tmp_path / 's.db'}"]
    fast = evalhydra.evaluate(["service=mock", *common])
    evalhydra.evaluate(["service=mock", "service.model=mock-slow", "service.mock.latency_ms=40", *common])
    assert run_cli("report", str(fast.run_id), "--store", str(tmp_path / "s.db"),
                   "--out", str(tmp_path / "fast"),
                   "--format", "md,jsonl",
                   cwd=tmp_path).returncode == 0
    report = (tmp_path / "fast" / "report.md").read_text()
    assert "TTFT p50 ms" in report and "Thinking tokens" in report
    summary = json.loads((tmp_path / "fast" / "summary.json").read_text())
    thinking = sum(r["reasoning_tokens"] for r in fast.rows())
    assert summary["tokens"]["reasoning"] == thinking > 0
    shown = run_cli("compare", "@mock:mock-model", "@mock:mock-slow", "--store", str(tmp_path / "s.db"),
                    "--format", "json", cwd=tmp_path)
    first = json.loads(shown.stdout)["first_token"]
    assert first["cases"] == 2 and first["difference_median_ms"] >= 35  # the slow side's 40 ms wait
    assert first["ci_low_ms"] <= first["difference_median_ms"] <= first["ci_high_ms"]
    text = run_cli("compare", "@mock:mock-model", "@mock:mock-slow", "--store", str(tmp_path / "s.db"),
                   cwd=tmp_path).stdout
    assert "time to first token (2 cases streamed on both sides)" in text
