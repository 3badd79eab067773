"""Issue 59, D4 and D13: outside schemas never trigger I/O, and their patterns run in bounded time.

A real HTTP server on 127.0.0.1 counts the requests a ``$ref`` to it would make; the tool loop runs
against the project's mock, which sends the arguments the case's script chooses; the OpenAI Evals
import runs as the command line runs it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalhydra.core.untrusted_schema import schema_errors, untrusted_validator
from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli
from tests.loopback import loopback_http
from tests.openai_evals.test_openai_import import ITEMS, eval_object, run_object

#: Catastrophic for a backtracking engine on a model-chosen string of a few dozen characters.
BACKTRACKS = "^(a|aa)+$"
HOSTILE_TEXT = "a" * 60 + "b"


@pytest.fixture
def counting_server() -> Iterator[tuple[str, list[str]]]:
    """A schema host on loopback that records every request it gets."""
    seen: list[str] = []

    def answer(method: str, path: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        seen.append(path)
        return 200, [], json.dumps({"type": "integer"}).encode()

    with loopback_http(answer) as url:
        yield f"{url}/schema.json", seen


def test_a_ref_outside_the_schema_is_refused_never_fetched(counting_server: tuple[str, list[str]],
                                                           tmp_path: Path) -> None:
    url, seen = counting_server
    secret = tmp_path / "secret.json"
    secret.write_text('{"type": "integer"}')
    schema = {"type": "object", "$defs": {"n": {"type": "integer"}},
              "properties": {"a": {"$ref": url}, "b": {"$ref": secret.as_uri()}, "c": {"$ref": "#/$defs/n"}}}
    validator = untrusted_validator(schema)
    found = {key: [e.message for e in schema_errors(validator, {key: "x"})] for key in "abc"}
    assert found["a"] == [f"the schema refers to {url}, outside itself: only refs within the schema (#/...)"
                          " are followed"]
    assert found["b"][0].startswith(f"the schema refers to {secret.as_uri()}, outside itself")
    assert found["c"] == ["'x' is not of type 'integer'"]  # a ref inside the schema is followed
    assert seen == []


def test_a_backtracking_pattern_gives_up_in_bounded_time() -> None:
    validator = untrusted_validator({"type": "string", "pattern": BACKTRACKS})
    started = time.perf_counter()
    (error,) = list(schema_errors(validator, HOSTILE_TEXT))
    assert time.perf_counter() - started < 5.0  # a backtracking engine takes days at 60 characters
    assert error.message.startswith(f"pattern {BACKTRACKS!r} took longer than 0.05 s")
    assert [e.message for e in schema_errors(validator, "aaaa")] == []  # a match still matches
    keyed = untrusted_validator({"type": "object", "patternProperties": {BACKTRACKS: {"type": "integer"}},
                                 "additionalProperties": False})
    started = time.perf_counter()
    assert len(list(schema_errors(keyed, {HOSTILE_TEXT: 1}))) >= 1
    assert time.perf_counter() - started < 5.0


@pytest.mark.slow
def test_a_tools_schema_neither_fetches_nor_freezes_the_run(counting_server: tuple[str, list[str]],
                                                           tmp_path: Path) -> None:
    url, seen = counting_server
    schema = {"type": "object",
              "properties": {"n": {"$ref": url}, "s": {"type": "string", "pattern": BACKTRACKS}}}
    tool = {"name": "look", "description": "Look.", "parameters_json": schema,
            "implementation": "tools_here:look"}
    (tmp_path / "reg").mkdir()
    (tmp_path / "reg" / "tools_here.py").write_text("def look(**kwargs):\n    return 'seen'\n")
    script = "Call look with {}. Then reply with exactly ok."
    lines = "".join(json.dumps({"id": case, "ideal": "ok", "input": script.format(json.dumps(args))}) + "\n"
                    for case, args in (("ref", {"n": 1}), ("pattern", {"s": HOSTILE_TEXT})))
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval(tools=[tool])},
                              data={"data/g/e/test.jsonl": lines})
    started = time.perf_counter()
    done = run_cli(f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                   "run.progress=false", cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.perf_counter() - started < 30 and seen == []
    import sqlite3

    db = sqlite3.connect(tmp_path / "s.db")
    calls = dict(db.execute("select case_id, error_kind || ': ' || result from tool_calls").fetchall())
    db.close()
    assert calls["ref"].startswith(f"schema_mismatch: error: the arguments do not fit the tool's schema: the"
                                   f" schema refers to {url}")
    assert calls["pattern"].startswith(f"schema_mismatch: error: the arguments do not fit the tool's schema:"
                                       f" pattern {BACKTRACKS!r} took longer")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["url", "file", "pattern"])
def test_an_openai_evals_item_schema_neither_fetches_nor_stalls_the_import(
        counting_server: tuple[str, list[str]], tmp_path: Path, where: str) -> None:
    url, seen = counting_server
    field = {"url": {"$ref": url}, "file": {"$ref": (tmp_path / "x.json").as_uri()},
             "pattern": {"type": "string", "pattern": BACKTRACKS}}[where]
    evaluation = eval_object()
    evaluation["data_source_config"] = {"type": "custom", "item_schema": {
        "type": "object", "properties": {"grade": field}}}
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    items = [{**ITEMS[0], "grade": HOSTILE_TEXT}, ITEMS[1]]
    (tmp_path / "run.json").write_text(json.dumps(run_object(
        {"type": "file_content", "content": [{"item": item} for item in items]})))
    started = time.perf_counter()
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert time.perf_counter() - started < 20 and seen == []
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    said = ("error: eval.json: item 1 (item-1): the schema refers to" if where != "pattern"
            else f"error: eval.json: item 1 (item-1).grade: pattern {BACKTRACKS!r} took longer")
    assert line.startswith(said), line
