"""Issue 60, item 9: docs/python-evals.md runs as written. Its Python blocks, copied into a fresh
folder (no repository path), run in a process of their own on the built-in mock; run again in a
new process, the evals defined in code resume: the same functions and cases give the same cells.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-evals.md"

def _script() -> str:
    return "\n\n".join(re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S))


def _run(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "script.py"], cwd=folder, capture_output=True, text=True,
                          timeout=180)


@pytest.mark.slow  # two processes, each running six evals
def test_the_pages_examples_run_as_written_and_resume_in_a_new_process(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(_script())
    first = _run(tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    store = tmp_path / "outputs" / "evalhydra.db"
    conn = sqlite3.connect(store)
    evals = {row[0] for row in conn.execute("select distinct eval_id from results")}
    assert evals == {"geo.capitals", "math.times", "tools.add", "tools.count", "svc.reply"}
    cells = conn.execute("select count(*) from results").fetchone()[0]
    conn.close()
    again = _run(tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 run now" in again.stdout and " run now" in again.stdout
    assert all(f"({n} run now" not in again.stdout for n in range(1, 10))  # nothing asked again
    conn = sqlite3.connect(store)
    assert conn.execute("select count(*) from results").fetchone()[0] == cells  # no new version
    conn.close()


@pytest.mark.parametrize(("given", "message"), [
    ({"id": "a b", "cases": []}, "is not an eval id"),
    ({"id": "g.e", "cases": ["just text"]}, r"Eval.cases\[0\]: a str, not a dict or a dataclass"),
])
def test_a_bad_eval_in_code_is_a_clear_error(given: dict[str, object], message: str, tmp_path: Path) -> None:
    import evalhydra

    with pytest.raises(evalhydra.EvalHydraError, match=message):
        evalhydra.evaluate(evalhydra.Eval(**given), store__path=str(tmp_path / "s.db"))  # type: ignore[arg-type]
