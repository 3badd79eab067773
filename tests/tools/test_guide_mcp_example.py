"""Issue 60, item 2: the tool-agents guide's MCP example, copied into a fresh project, runs as
written: a server file beside the eval, ``python`` as the command, from another folder; and a
server that does not start says what it ran and where."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import run_cli

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "tool-agents.md"


def _blocks() -> dict[str, str]:
    """The MCP section's example files: the block after each `name`, keyed by that name."""
    section = GUIDE.read_text().split("## MCP servers", 1)[1].split("\n## ", 1)[0]
    named_block = r"`([\w/.]+\.(?:py|yaml|jsonl))`[^`]*?```(?:python|yaml|json)\n(.*?)```"
    found = re.findall(named_block, section, re.S)
    return {name: body for name, body in found}


@pytest.mark.slow
def test_the_guides_mcp_example_runs_as_written_in_a_fresh_project(tmp_path: Path) -> None:
    blocks = _blocks()
    assert set(blocks) == {"notes_server.py", "evals/notes/remember.yaml", "evals/notes/remember.jsonl"}
    project = tmp_path / "my-evals"
    for name, body in blocks.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(body)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_cli(f"registry={project}", "eval=notes.remember", "run.progress=false", cwd=elsewhere,
                   timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "1 cell, 1 passed" in done.stdout


@pytest.mark.slow
def test_a_server_that_does_not_start_says_what_it_ran_and_where(tmp_path: Path) -> None:
    blocks = _blocks()
    project = tmp_path / "p"
    for name, body in blocks.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(body)
    (project / "evals/notes/remember.yaml").write_text(
        blocks["evals/notes/remember.yaml"].replace("notes_server.py", "no_such_server.py"))
    done = run_cli(f"registry={project}", "eval=notes.remember", f"store.path={tmp_path / 's.db'}",
                   "run.progress=false", cwd=tmp_path, timeout=120)
    assert "MCP server 'notes' did not start" in done.stdout + done.stderr
    assert "no_such_server.py in a scratch folder of the cell" in done.stdout + done.stderr
    assert "relative to the eval file's folder" in done.stdout + done.stderr
