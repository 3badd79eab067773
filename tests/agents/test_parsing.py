"""Pure parsing: traces, token lines, cost, markers and the value objects."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalhydra.agents import (
    TokenUsage,
    ToolCallRecord,
    TrialResult,
    TrialTrace,
    ValidationCheck,
    ValidationResult,
    cost_usd,
    parse_usage,
    trace_from_history,
    verification_marker,
)
from evalhydra.config.schema import PricingConfig

SEED_LINE = (
    "💸 (Requests: 4 | Tool Calls: 7 | Total: 1500) Input: 1000 | Audio Input: 0 | Output: 500 | "
    "Audio Output: 0 | Cache Read: 200 | Cache Write: 0 | Details: {...}"
)


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "h.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_pydantic_ai_history(tmp_path: Path) -> None:
    history = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]},
        {
            "kind": "response",
            "parts": [
                {"part_kind": "text", "content": "Let me look."},
                {"part_kind": "tool-call", "tool_name": "ls", "args": '{"path": "."}'},
                {"part_kind": "tool-call", "tool_name": "read", "args": {"path": "a"}},
                {"part_kind": "tool-call", "tool_name": "odd", "args": "not json"},
            ],
        },
        {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "ls", "content": "a"}]},
        {"parts": [{"part_kind": "text", "content": "Done."}]},
        {"kind": "response", "parts": []},
    ]
    trace = trace_from_history(write(tmp_path, {"history": history}))
    assert trace.tool_calls == [
        ToolCallRecord("ls", {"path": "."}),
        ToolCallRecord("read", {"path": "a"}),
        ToolCallRecord("odd", {}),
    ]
    assert trace.tool_names == ["ls", "read", "odd"]
    assert trace.assistant_text == "Let me look.\nDone."
    assert trace.turn_count == 3


def test_legacy_history(tmp_path: Path) -> None:
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "on it"},
        {"tool_name": "write", "args": {"p": 1}},
        {"tool_call": {"name": "exec", "arguments": '{"cmd": "ls"}'}},
        {"tool_call": {"name": "grep", "args": {"q": "x"}}},
        {"role": "tool", "name": "fetch", "content": "..."},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "finished"},
        "junk",
    ]
    trace = trace_from_history(write(tmp_path, history))
    assert trace.tool_names == ["write", "exec", "grep", "fetch"]
    assert [c.args for c in trace.tool_calls] == [{"p": 1}, {"cmd": "ls"}, {"q": "x"}, {}]
    assert (trace.assistant_text, trace.turn_count) == ("on it\nfinished", 2)


@pytest.mark.parametrize("content", ["{broken", "42", '"text"', "null", '{"history": 5}'])
def test_bad_history_gives_empty_trace(tmp_path: Path, content: str) -> None:
    assert trace_from_history(write(tmp_path, content)) == TrialTrace()


def test_missing_history_gives_empty_trace(tmp_path: Path) -> None:
    assert trace_from_history(tmp_path / "nope.json") == TrialTrace()
    assert trace_from_history(tmp_path) == TrialTrace()  # a directory


def test_trace_round_trips_through_dict() -> None:
    trace = TrialTrace([ToolCallRecord("a", {"x": 1})], ["a"], "text", 2)
    assert TrialTrace.from_dict(json.loads(json.dumps(trace.to_dict()))) == trace


def test_zrb_line_seed_example() -> None:
    assert parse_usage(SEED_LINE, "zrb") == TokenUsage(1500, 1000, 500, 200, cache_in_input=True)


def test_zrb_last_line_wins_and_audio_is_ignored() -> None:
    first = SEED_LINE.replace("1500", "10").replace("1000", "5")
    audio_first = "💸 (Total: 30) Audio Input: 99 | Input: 20 | Audio Output: 98 | Output: 10 | Cache Read: 1"
    usage = parse_usage(f"{first}\nnoise\n{audio_first}\n", "zrb")
    assert (usage.total_tokens, usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (
        30,
        20,
        10,
        1,
    )


@pytest.mark.parametrize("template", ["zrb", "claude-code", "opencode", None])
def test_no_usage_gives_zeros(template: str | None) -> None:
    assert parse_usage("nothing to see {} [] Tokens: soon", template) == TokenUsage()


def test_opencode_tokens_line() -> None:
    text = "Tokens: 1 input, 2 output\nworking\nTokens: 1,234 input, 567 output, 89 cache read\n"
    assert parse_usage(text, "opencode") == TokenUsage(1890, 1234, 567, 89)
    assert parse_usage("tokens: 5 input, 6 output", "opencode") == TokenUsage(11, 5, 6, 0)


def test_claude_usage_block_with_noise() -> None:
    result = {
        "type": "result",
        "usage": {"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 2},
    }
    text = f"warning {{oops\n{json.dumps(result, indent=2)}\nVERIFICATION_RESULT: PASS\n[TIMEOUT after 1s]\n"
    assert parse_usage(text, "claude-code") == TokenUsage(12, 7, 3, 2)
    assert parse_usage(json.dumps({"usage": {"input_tokens": None}}), "claude-code") == TokenUsage()


def test_custom_argv_tries_every_format() -> None:
    assert parse_usage(SEED_LINE, None).total_tokens == 1500
    assert parse_usage("Tokens: 3 input, 4 output", None).total_tokens == 7
    assert parse_usage('{"usage": {"input_tokens": 1, "output_tokens": 1}}', None).total_tokens == 2


def test_cost() -> None:
    pricing = PricingConfig(input_per_mtok=2.0, output_per_mtok=10.0, cached_input_per_mtok=0.5)
    cached_in_input = TokenUsage(1500, 1000, 500, 200, cache_in_input=True)
    assert cost_usd(cached_in_input, pricing) == pytest.approx((800 * 2 + 200 * 0.5 + 500 * 10) / 1e6)
    separate = TokenUsage(1700, 1000, 500, 200)
    assert cost_usd(separate, pricing) == pytest.approx((1000 * 2 + 200 * 0.5 + 500 * 10) / 1e6)
    no_cache_rate = PricingConfig(input_per_mtok=2.0, output_per_mtok=10.0)
    assert cost_usd(separate, no_cache_rate) == pytest.approx((1200 * 2 + 500 * 10) / 1e6)
    assert cost_usd(separate, PricingConfig()) == 0.0


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("x\n  VERIFICATION_RESULT: pass  \nVERIFICATION_RESULT: FAIL\n", "PASS"),
        ("VERIFICATION_RESULT: maybe\nVERIFICATION_RESULT: Excellent\n", "EXCELLENT"),
        ("say VERIFICATION_RESULT: PASS\n", None),
        ("", None),
    ],
)
def test_verification_marker(log: str, expected: str | None) -> None:
    assert verification_marker(log) == expected


def test_validation_result_checks_its_values() -> None:
    with pytest.raises(ValueError, match="status"):
        ValidationResult("GOOD", 1.0)
    with pytest.raises(ValueError, match="score"):
        ValidationResult("PASS", 1.5)


def test_validation_result_coerce() -> None:
    native = ValidationResult("PASS", 0.5, [ValidationCheck("a", True)])
    assert ValidationResult.coerce(native) is native
    as_dict = {"status": "PASS", "score": 0.5, "details": [{"name": "a", "passed": True}]}
    assert ValidationResult.coerce(as_dict) == native
    pydantic_like = SimpleNamespace(
        status="PASS", score=0.5, details=[SimpleNamespace(name="a", passed=True)]
    )
    assert ValidationResult.coerce(pydantic_like) == native
    with pytest.raises(TypeError, match="must return a ValidationResult"):
        ValidationResult.coerce(True)


def test_trial_result_dict_has_the_seed_keys() -> None:
    result = TrialResult("m:x", "case", 1, "PASS", 1.5, 0, "/h.json", cost_usd=0.25, trial_dir="/t")
    row = result.to_dict()
    assert list(row) == [
        "id", "model", "test_case", "trial_index", "status", "duration", "exit_code", "log_path",
        "stdout_log_path", "verification_result", "total_tokens", "input_tokens", "output_tokens",
        "cache_read_tokens", "tool_calls", "tool_call_count",
    ]  # fmt: skip
    assert uuid.UUID(row["id"]).version == 4 and len(row["id"]) == 36  # a dashed uuid4, as zrb writes
    extended = result.to_dict(extended=True)
    assert (extended["cost_usd"], extended["trial_dir"], extended["trace"]["turn_count"]) == (0.25, "/t", 0)
    assert TrialResult.from_dict(json.loads(json.dumps(extended))) == result
    assert TrialResult.from_dict(row).to_dict() == row
