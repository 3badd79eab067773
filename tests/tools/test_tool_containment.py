"""Issue 59, D1, D2, D6, D14: tools that misbehave stay inside their cell.

Each test runs ``python -m evalhydra`` on a registry whose tool module does what the campaign's
hostile tools did, against the project's mock (it plays a model that calls the tool the case
names, then answers); the store is read afterwards.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

HOSTILE = textwrap.dedent('''
    import math
    import sys
    import threading

    GATE = threading.Event()  # never set: a blocking tool waits until its process ends


    def block() -> str:
        GATE.wait(60)
        return "late"


    def leave() -> str:
        sys.exit(4)


    async def aleave() -> str:
        raise SystemExit(5)


    def huge() -> int:
        return math.factorial(2000)  # more digits than int -> str allows


    def cyclic() -> dict:
        loop = {}
        loop["self"] = loop
        return loop


    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text for you")

        __repr__ = __str__


    def unprintable() -> object:
        return Unprintable()


    def fine() -> str:
        return "ok"
''')
NAMES = ("block", "leave", "aleave", "huge", "cyclic", "unprintable", "fine")
BLOCKED = 45  # more than trio's default 40 worker threads


def _registry(root: Path, module: str = HOSTILE) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "hostile_tools.py").write_text(module)
    tools = [{"name": name, "description": f"The {name} tool.", "parameters_json": {"type": "object"},
              "implementation": f"hostile_tools:{name}", "timeout_s": 0.3} for name in NAMES]
    cases = [(f"block{i:02d}", "block") for i in range(BLOCKED)] + [(name, name) for name in NAMES[1:]]
    lines = "".join(json.dumps({"id": case, "input": f"Call {tool} with {{}}. Then reply with exactly done.",
                                "ideal": "done"}) + "\n" for case, tool in cases)
    return write_registry(root, evals={"g/e.json": smoke_eval(tools=tools)},
                          data={"data/g/e/test.jsonl": lines})


def test_hostile_tools_are_their_cells_errors_and_the_run_ends(tmp_path: Path) -> None:
    """45 blocking sync tools past their timeout, sys.exit() in a sync and an async tool, and
    results JSON cannot encode: every cell is stored and scored, the run ends and says how many
    threads it abandoned."""
    store = tmp_path / "s.db"
    done = run_cli(f"registry={_registry(tmp_path / 'reg')}", "eval=g.e", f"store.path={store}",
                   "run.progress=false", "run.concurrency=64", cwd=tmp_path, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"{BLOCKED} thread(s) of user code (tools, matchers) outlived their timeouts" in done.stdout
    db = sqlite3.connect(store)
    statuses = dict(db.execute("select status, count(*) from results group by status").fetchall())
    assert statuses == {"PASS": BLOCKED + len(NAMES) - 1}  # every cell answered "done" after its tool
    calls = dict(db.execute("select case_id, coalesce(error_kind, 'ok') || ': ' || result from tool_calls"))
    db.close()
    late = "timeout: error: the tool took longer than 0.3 s"
    assert all(calls[f"block{i:02d}"] == late for i in range(BLOCKED))
    assert calls["leave"] == "tool_exception: error: SystemExit: 4"
    assert calls["aleave"] == "tool_exception: error: SystemExit: 5"
    assert calls["huge"].startswith("ok: <a int that cannot be shown as text: ValueError: Exceeds the limit")
    assert calls["cyclic"] == "ok: {'self': {...}}"
    assert calls["unprintable"] == ("ok: <a Unprintable that cannot be shown as text: RuntimeError: no text"
                                    " for you>")
    assert calls["fine"] == "ok: ok"


def test_a_tool_module_that_cannot_be_imported_refuses_the_plan(tmp_path: Path) -> None:
    for body, said in (("import sys\nsys.exit(3)\n", "raised SystemExit: 3"),
                       ("raise RuntimeError('no')\n", "raised RuntimeError: no"),
                       ("import no_such_module_here\n", "No module named 'no_such_module_here'")):
        registry = _registry(tmp_path / said[:8].strip(), body + HOSTILE)
        done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        first = done.stderr.splitlines()[0]
        assert first.startswith("error: ") and "tool 'block'" in first and said in first, first
        assert "Traceback" not in done.stderr and not (tmp_path / "s.db").exists()
