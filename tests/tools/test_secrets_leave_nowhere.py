"""Issue 59, D3: the key never reaches disk or the terminal, whatever carries it there.

A tool returns the service's key and the mock, playing the model, passes it on (its answer is the
last tool result); another case asks the model to call a tool with the key as an argument; a
custom matcher raises with the key in its message. With the response cache on, every byte the run
writes (store, cache, reports, Hydra's saved config) and everything it prints is searched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

KEY = "sk-test-leaky-8f2c1e9a7b"

TOOLS = '''
import os


def leak() -> str:
    return "the key is " + os.environ["LEAKY_KEY"]


def note(text: str) -> str:
    return "noted"


def judge(ctx, **kwargs):
    if "raise" in ctx.case.id:
        raise ValueError("cannot score with key " + os.environ["LEAKY_KEY"])
    return True
'''


@pytest.mark.slow
def test_the_key_is_masked_in_every_file_and_line_the_run_writes(tmp_path: Path) -> None:
    reg = tmp_path / "reg"
    reg.mkdir()
    (reg / "leaky_tools.py").write_text(TOOLS)
    tools = [{"name": name, "description": name, "parameters_json": params,
              "implementation": f"leaky_tools:{name}"} for name, params in (("leak", {"type": "object"}),
                                  ("note", {"type": "object", "properties": {"text": {"type": "string"}}}))]
    cases = [{"id": "passes-it-on", "input": "Call leak with {}."},
             {"id": "calls-with-it",
              "input": f'Call note with {{"text": "{KEY}"}}. Then reply with exactly done.'},
             {"id": "raise", "input": "Reply with exactly fine."}]
    registry = write_registry(reg, evals={"g/e.json": smoke_eval(
        tools=tools, matcher={"kind": "custom", "_target_": "leaky_tools.judge"})},
        data={"data/g/e/test.jsonl": "".join(json.dumps(c) + "\n" for c in cases)})
    out = tmp_path / "out"
    done = run_cli(f"registry={registry}", "eval=g.e", "service.api_key_env=LEAKY_KEY",
                   f"store.path={out / 's.db'}", "cache.enabled=true", f"cache.path={out / 'cache.db'}",
                   f"hydra.run.dir={out / 'run'}", "report=[json,jsonl,md,html]", "run.progress=false",
                   cwd=tmp_path, env={"LEAKY_KEY": KEY})
    assert done.returncode in (0, 1), done.stderr
    assert KEY not in done.stdout + done.stderr
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "cache.db" for p in written) and any(p.name == "report.md" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    # what the key was in each place is still readable, masked
    store = (out / "s.db").read_bytes()
    assert b"the key is ***" in store and b"cannot score with key ***" in store
    assert os.environ.get("LEAKY_KEY") is None  # the test's own environment never held it
