"""JSON read as zig_eval reads it, wherever zig_eval reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import ExpectedToolCall, ToolCall
from evalhydra.matchers.jsonmatch import json_fields
from evalhydra.matchers.toolcall import tool_call_match
from evalhydra.registry.datasets import iter_cases
from evalhydra.registry.definitions import load_registry
from evalhydra.services.openai import InvalidResponseError, parse_chat_response, upstream_error_message
from tests.conftest import smoke_eval, write_registry


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '{"o": {"k": 1, "k": 1}}',
        '["\\ud800"]',
        '{"x": "\\udc00 tail"}',
        '{"\\ud83d": 1}',
        "NaN",
        '{"n": Infinity}',
    ],
)
def test_what_zig_refuses_is_invalid(text: str) -> None:
    with pytest.raises(ValueError):
        strictjson.loads(text)


def test_what_zig_accepts_still_parses() -> None:
    assert strictjson.loads('{"e": "\\ud83d\\ude00", "n": 1, "f": 1.5, "a": [{"k": 1}, {"k": 2}]}') == {
        "e": "😀",
        "n": 1,
        "f": 1.5,
        "a": [{"k": 1}, {"k": 2}],
    }
    assert strictjson.loads(b'{"raw": "\xc3\xa9"}') == {"raw": "é"}


def test_a_number_beyond_a_double_is_its_literal_text() -> None:
    value = strictjson.loads('{"big": 1e999, "other": 2e999}')
    assert value["big"] == "1e999" and isinstance(value["big"], strictjson.NumberLiteral)
    expected = [ExpectedToolCall(name="t", arguments_json='{"n": 1e999}')]
    assert tool_call_match(expected, [ToolCall(name="t", arguments='{"n": 1e999}')]).passed
    assert tool_call_match(expected, [ToolCall(name="t", arguments='{"n": 2e999}')]).reason == (
        "tool argument value mismatch"
    )  # Python's json would make both inf, and equal
    assert not tool_call_match(expected, [ToolCall(name="t", arguments='{"n": "1e999"}')]).passed


def test_matchers_refuse_repeated_keys() -> None:
    assert json_fields('{"answer": 1, "answer": 2}', ["answer"]).reason == "invalid json output"
    expected = [ExpectedToolCall(name="t", arguments_json='{"q": 1}')]
    assert tool_call_match(expected, [ToolCall(name="t", arguments='{"q": 1, "q": 1}')]).reason == (
        "invalid arguments json"
    )
    bad_expected = [ExpectedToolCall(name="t", arguments_json='{"q": 1, "q": 1}')]
    assert tool_call_match(bad_expected, [ToolCall(name="t", arguments='{"q": 1}')]).reason == (
        "invalid expected arguments json"
    )


def test_upstream_bodies_are_read_strictly() -> None:
    body = b'{"model": "m", "choices": [{"message": {"role": "assistant", "content": "a", "content": "b"}}]}'
    with pytest.raises(InvalidResponseError, match="InvalidUpstreamJson"):
        parse_chat_response(body, "m")
    assert upstream_error_message(b'{"error": {"message": "x", "message": "y"}}') == "UpstreamHttpError"


def test_a_definition_with_a_repeated_key_names_the_file_and_line(tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "reg",
        evals={"g/e.json": smoke_eval()},
        data={"data/g/e/test.jsonl": '{"id": "c1", "input": "a", "ideal": "b"}\n'},
    )
    spec = json.dumps(smoke_eval(), indent=2).replace('"split": "test",', '"split": "test",\n  "group": "h",')
    (root / "evals" / "g" / "e.json").write_text(spec)
    line = spec.splitlines().index('  "group": "h",') + 1
    with pytest.raises(EvalHydraError, match=rf"e\.json:{line}: invalid JSON: duplicate object key 'group'"):
        load_registry(root).eval("g.e")


def test_a_dataset_line_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    root = write_registry(
        tmp_path / "reg",
        evals={"g/e.json": smoke_eval()},
        data={
            "data/g/e/test.jsonl": '{"id": "c1", "input": "a", "ideal": "b"}\n'
            '{"id": "c2", "input": "a", "input": "b"}\n'
        },
    )
    with pytest.raises(EvalHydraError, match=r"test\.jsonl:2: invalid JSON: duplicate object key 'input'"):
        list(iter_cases(root, "data/g/e/test.jsonl"))
