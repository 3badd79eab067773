"""Issue 59, R1: an attachment path the filesystem refuses is a clear exit-2 error, never a
traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

@pytest.mark.parametrize(("path", "said"), [("a" * 5000, "File name too long"),
                                            ("d/" * 3000 + "x", "File name too long")])
def test_an_attachment_path_the_filesystem_refuses_is_a_clear_error(tmp_path: Path, path: str,
                                                                    said: str) -> None:
    line = json.dumps({"id": "c", "input": "hi", "ideal": "hi",
                       "attachments": [{"kind": "file", "path": path, "mime_type": "text/plain"}]})
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval()},
                              data={"data/g/e/test.jsonl": line + "\n"})
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    first, fix = done.stderr.splitlines()[:2]
    assert first.startswith("error: ") and "attachments[0]: AttachmentUnreadable" in first and said in first
    assert len(first) < 500 and fix.startswith("Give a path relative to the registry root")
