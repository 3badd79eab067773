"""Issue 60, item 1: docs/mock.md's sentences behave as written on the mock, and its --help lists
them. Each example goes to the project's mock in its own process, as a chat request."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

DOC = Path(__file__).resolve().parents[2] / "docs" / "mock.md"
CODE = re.compile(r"`([^`]+)`")


def _rows() -> list[tuple[str, str, str]]:
    """(sentence, example, answer) of each row of the table under "## What it answers"."""
    section = DOC.read_text().split("## What it answers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| the")]
    cells = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    return [(sentence, example, answer) for sentence, example, answer in cells]


def _ask(url: str, messages: list[dict[str, object]], tools: list[dict[str, object]] | None = None) -> dict:
    body: dict[str, object] = {"model": "mock-model", "messages": messages}
    if tools:
        body["tools"] = tools
    reply = httpx.post(f"{url}/chat/completions", json=body, timeout=10).json()
    return dict(reply["choices"][0]["message"])


def test_every_sentence_of_the_mocks_page_behaves_as_written(url: str) -> None:
    rows = _rows()
    assert len(rows) >= 5
    for sentence, example_cell, answer_cell in rows:
        (example,) = CODE.findall(example_cell)
        said = CODE.findall(answer_cell)
        if sentence.startswith("`Call NAME"):
            call = re.fullmatch(r"(\w+)\((.*)\)", said[0])
            assert call is not None, answer_cell
            tool = {"type": "function", "function": {"name": call.group(1), "parameters": {"type": "object"}}}
            first = _ask(url, [{"role": "user", "content": example}], [tool])
            (made,) = first["tool_calls"]
            assert (made["function"]["name"], made["function"]["arguments"]) == (call.group(1), call.group(2))
            result = {"role": "tool", "tool_call_id": made["id"], "content": "whatever the tool said"}
            last = _ask(url, [{"role": "user", "content": example}, first, result], [tool])
            assert last["content"] == said[1], (sentence, last)
            continue
        (answer,) = said
        assert _ask(url, [{"role": "user", "content": example}])["content"] == answer, (sentence, answer)


def test_the_mocks_help_lists_every_sentence() -> None:
    shown = subprocess.run([sys.executable, "-m", "evalhydra.services.mock", "--help"], capture_output=True,
                           text=True, timeout=60).stdout
    for sentence, _, _ in _rows()[1:]:
        words = CODE.findall(sentence)[0].replace("…", "...")
        assert words in shown, words
    assert "an echo" in shown


def test_the_mocks_page_is_linked_from_the_guides_that_use_it() -> None:
    docs = DOC.parent
    for guide in ("first-eval.md", "tool-agents.md", "uncertainty.md"):
        assert "(mock.md" in (docs / guide).read_text(), guide
