"""Issue 59, D17: malformed BFCL files are clear exit-2 errors naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

GOOD = ('{"id": "a", "question": [[{"role": "user", "content": "x"}]],'
        ' "function": [{"name": "f", "parameters": {"type": "dict", "properties": {}}}]}\n')


@pytest.mark.parametrize(("dataset", "answers", "said"), [
    ('{"id": "a", "question": [[{"role": "user", "content": "x"}]], "function": [{"name": ["f"]}]}\n', None,
     "test.jsonl:1: 'function' must be a list of functions with names"),
    ('{"id": "a", "question": "hi", "function": []}\n', None, "test.jsonl:1: a BFCL question of 0 turns"),
    (GOOD, b"\xff\xfe\n", "possible_answer/test.jsonl:1: not UTF-8 text"),
    (GOOD, b'{"id": "a", "ground_truth": \n', "possible_answer/test.jsonl:1: invalid JSON"),
])
def test_a_malformed_bfcl_file_is_a_clear_error(tmp_path: Path, dataset: str, answers: bytes | None,
                                                said: str) -> None:
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval(matcher={"kind": "bfcl_ast"})},
                              data={"data/g/e/test.jsonl": dataset})
    if answers is not None:
        (registry / "data/g/e/possible_answer").mkdir()
        (registry / "data/g/e/possible_answer/test.jsonl").write_bytes(answers)
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith("error: ") and said in done.stderr.splitlines()[0], done.stderr
