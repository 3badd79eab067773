"""Issue 60, item 10: the guides run as written. first-eval.md and tool-agents.md, followed step by
step in a fresh folder (no repository path) by a subprocess per command, as a user would type
them: each command exits as it should and prints what the page states after its ``→``; the
files, the error and the reuse line the page shows are what evalhydra writes and prints.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import mock_process

DOCS = Path(__file__).resolve().parents[2] / "docs"

pytestmark = pytest.mark.slow  # a process per command


def _steps(page: str, section: str | None = None) -> list[tuple[str, str | None]]:
    """Each command line of the page's ``bash`` blocks (of one ``## section``), and the result it
    states after ``→`` in its comment (None when it states none)."""
    text = (DOCS / page).read_text()
    if section is not None:
        text = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    steps = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command, _, comment = line.partition("  #")
            if command.strip():
                stated = comment.split("→", 1)[1].strip() if "→" in comment else None
                steps.append((command.strip(), stated))
    return steps


def _shell(command: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PATH": path, **(env or {})})


def _follow(steps: list[tuple[str, str | None]], cwd: Path) -> Path:
    """Run each step in turn (``cd`` moves the folder the next ones run in); return the last folder."""
    for command, stated in steps:
        if command.startswith("cd "):
            cwd = cwd / shlex.split(command)[1]
            continue
        done = _shell(command, cwd)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
        if stated is not None:
            assert stated in done.stdout + done.stderr, (command, stated, done.stdout[-2000:])
    return cwd


def test_first_eval_md_as_written(tmp_path: Path) -> None:
    init_steps = _steps("first-eval.md", "Start from a project")
    project = _follow(init_steps, tmp_path)
    guide = (DOCS / "first-eval.md").read_text()
    tree = guide.split("## Start from a project", 1)[1].split("```\n", 3)[2]
    listed = re.findall(r"[├└]── (\S+)", tree)
    assert listed and all((project / name).is_file() for name in listed), listed
    elsewhere = _shell("evalhydra eval=capitals run.progress=false", project)
    assert elsewhere.returncode == 2 and "found evals/ here: add registry=." in elsewhere.stderr
    again = _shell("evalhydra registry=. eval=capitals run.progress=false", project)
    reuse = guide.split("which runs and when:\n\n```\n", 1)[1].split("\n```", 1)[0]
    assert _masked(_line_like(again.stdout, "stored results reused")) == _masked(reuse)
    _follow(_steps("first-eval.md", "Run a few cases first"), project)
    _the_error_as_shown(guide, project)
    with mock_process() as url:
        (project / ".env").write_text(f"OPENAI_BASE_URL={url}\nOPENAI_MODEL=mock-model\n")
        _follow(_steps("first-eval.md", "Your endpoint"), project)


def _the_error_as_shown(guide: str, project: Path) -> None:
    """The page's broken eval file (its eval file with ``datset_path``) gives the error it shows."""
    eval_file = guide.split("## The eval file", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    shown = guide.split("each with its fix:\n\n```\n", 1)[1].split("\n```", 1)[0]
    target = project / "evals" / "capitals.yaml"
    kept = target.read_text()
    target.write_text(eval_file.replace("dataset_path", "datset_path"))
    try:
        broken = _shell("evalhydra registry=. eval=capitals", project)
    finally:
        target.write_text(kept)
    assert broken.returncode == 2
    assert broken.stderr.strip().replace(str(project), "my-evals") == shown


def _line_like(text: str, words: str) -> str:
    return next(line for line in text.splitlines() if words in line)


def _masked(line: str) -> str:
    line = re.sub(r"eval-[\w.-]+-[0-9a-f]{8}", "RUN", line)
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "WHEN", line)


def test_tool_agents_md_as_written(tmp_path: Path) -> None:
    steps = _steps("tool-agents.md")
    runs = [(c, s) for c, s in steps if c.startswith("python -m evalhydra")]
    assert [c for c, _ in runs] == ["python -m evalhydra eval=tools.order_desk",
                                    "python -m evalhydra eval=tools.bfcl_mini"]
    _follow(runs, tmp_path)
    query, stated = next((c, s) for c, s in steps if c.startswith("sqlite3 "))
    sql = shlex.split(query)[2]  # run with Python's sqlite3: the CLI may not be installed
    conn = sqlite3.connect(tmp_path / "outputs" / "evalhydra.db")
    printed = ["|".join("" if v is None else str(v) for v in row) for row in conn.execute(sql)]
    assert any(stated in line for line in printed), printed
    guide = (DOCS / "tool-agents.md").read_text()
    queries = guide.split("```sql\n", 1)[1].split("```", 1)[0].split(";")
    run_id = conn.execute("select run_id from runs where config like '%order_desk%'").fetchone()[0]
    answered = [conn.execute(q.replace("eval-tools-…", run_id)).fetchall() for q in queries if q.strip()]
    conn.close()
    assert len(answered[0]) == 2 and {row[1] for row in answered[0]} == {"model_stopped"}  # two cases
    assert {(name, kind) for name, kind, _ in answered[1]} >= {("lookup_order", None), ("refund", None)}


def test_the_functions_and_canned_replies_fragment_runs_as_written(tmp_path: Path) -> None:
    """tool-agents.md's ``tools`` fragment, as written, in an eval of a fresh project."""
    guide = (DOCS / "tool-agents.md").read_text()
    section = guide.split("## Python functions and canned replies", 1)[1]
    tools = json.loads("{" + section.split("```json\n", 1)[1].split("```", 1)[0] + "}")["tools"]
    (tmp_path / "my_tools.py").write_text(
        "def add(a: int, b: int) -> int:\n    return a + b\n\n\n"
        "async def search(query: str = '') -> str:\n    return 'found ' + query\n")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "tools.json").write_text(json.dumps(
        {"dataset_path": "tools.jsonl", "tools": tools, "matcher": {"kind": "includes"}}))
    cases = [("add", 'Call add with {"a": 1, "b": 2}. Then reply with exactly 3.', "3"),
             ("oslo", 'Call weather with {"city": "Oslo"}.', '"temp": -3'),
             ("elsewhere", 'Call weather with {"city": "Bergen"}.', "unknown city")]
    (tmp_path / "evals" / "tools.jsonl").write_text("".join(
        json.dumps({"id": i, "input": text, "ideal": ideal}) + "\n" for i, text, ideal in cases))
    done = _shell("evalhydra registry=. eval=tools run.progress=false", tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "3 cells, 3 passed" in done.stdout


def test_simulated_users_md_as_written(tmp_path: Path) -> None:
    """simulated-users.md: its two runs print what it states, its Python prints what it states,
    and its SQL answers over the store those runs wrote."""
    steps = _steps("simulated-users.md")
    assert [c for c, _ in steps] == ["python -m evalhydra eval=users.order_desk_chat",
                                     "python -m evalhydra eval=users.order_desk_chat"
                                     " +eval.user.mock.error_rate=0.3",
                                     "python -m evalhydra eval=users.order_desk_tau2"]
    _follow(steps, tmp_path)
    guide = (DOCS / "simulated-users.md").read_text()
    code = guide.split("```python\n", 1)[1].split("```", 1)[0]
    stated = code.split("# → ", 1)[1].strip()
    printed = _shell(f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}", tmp_path)
    assert printed.returncode == 0 and printed.stdout.strip() == stated, printed.stderr
    queries = [q for q in guide.split("```sql\n", 1)[1].split("```", 1)[0].split(";") if q.strip()]
    conn = sqlite3.connect(tmp_path / "outputs" / "evalhydra.db")
    sides = conn.execute(queries[0]).fetchall()
    ends = conn.execute(queries[1]).fetchall()
    conn.close()
    assert {side for side, *_ in sides} == {"user", "agent"}
    assert {stop for _, _, stop, _, _ in ends} == {"user_stop"} and len({sim for *_, sim in ends}) == 2
