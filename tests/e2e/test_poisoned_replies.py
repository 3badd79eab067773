"""A poisoned reply, history or matcher result costs one cell, never the run (issue 33, item 1).

A real HTTP server on loopback (the standard library's, in a thread) answers
every chat request with a plain completion, except for the cases named POISON,
which get crafted bytes: a UTF-8-encoded surrogate in the content, the model
or the error message, or JSON nested 1,000 levels deep.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

import evalhydra
from evalhydra.core import strictjson
from evalhydra.reports.writer import write_run_reports
from evalhydra.store.db import open_store
from tests.conftest import smoke_eval, write_registry
from tests.helpers import http_server

SURROGATE = b"\xed\xa0\x80"  # U+D800 encoded as if it were a character: no valid UTF-8
POISONS: dict[str, tuple[int, bytes]] = {
    "content": (200, b'{"model":"m","choices":[{"message":{"role":"assistant","content":"a' + SURROGATE
                + b'"},"finish_reason":"stop"}]}'),
    "model": (200, b'{"model":"m' + SURROGATE + b'","choices":[{"message":{"role":"assistant",'
              b'"content":"OK"},"finish_reason":"stop"}]}'),
    "error": (500, b'{"error":{"message":"boom ' + SURROGATE + b'"}}'),
    "deep": (200, b'{"model":"m","choices":[{"message":{"role":"assistant","content":"OK","x":'
             + b"[" * 1000 + b"]" * 1000 + b"}}]}"),
    "escaped": (200, b'{"model":"m","choices":[{"message":{"role":"assistant","content":"\\ud800"}}]}'),
    # usage counts past SQLite's 64-bit integers (issue 47, item 3)
    "usage_2_64": (200, b'{"model":"m","choices":[{"message":{"role":"assistant","content":"OK"}}],'
                   b'"usage":{"prompt_tokens":18446744073709551616,"completion_tokens":1}}'),
    "usage_huge": (200, b'{"model":"m","choices":[{"message":{"role":"assistant","content":"OK"}}],'
                   b'"usage":{"prompt_tokens":1,"completion_tokens":' + b"9" * 400 + b"}}"),
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        text = json.loads(body)["messages"][-1]["content"]
        status, reply = next(((s, r) for name, (s, r) in POISONS.items() if f"POISON-{name}" in text),
                             (200, b'{"model":"m","choices":[{"message":{"role":"assistant","content":"OK"},'
                                   b'"finish_reason":"stop"}]}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def hostile_url() -> Iterator[str]:
    with http_server(_Handler) as port:
        yield f"http://127.0.0.1:{port}/v1"


def _registry(root: Path, poison: str, cases: int = 200) -> Path:
    lines = [{"id": f"c{i:03d}", "input": "Say OK.", "ideal": "OK"} for i in range(cases)]
    lines[57]["input"] = f"Say OK. POISON-{poison}"
    text = "".join(json.dumps(line) + "\n" for line in lines)
    return write_registry(root, evals={"g/e.json": smoke_eval("g.e")}, data={"data/g/e/test.jsonl": text})


#: The poisons the default suite runs (the rest, alike in cost, run with the slow tests).
_QUICK = ("content",)


@pytest.mark.parametrize("poison", [p if p in _QUICK else pytest.param(p, marks=pytest.mark.slow)
                                    for p in sorted(POISONS)])
def test_one_poisoned_reply_among_200_costs_one_cell(poison: str, hostile_url: str, tmp_path: Path) -> None:
    registry = _registry(tmp_path / "reg", poison)
    args = [f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
            f"service.base_url={hostile_url}", "service.retry.max_attempts=1",
            f"store.path={tmp_path / 's.db'}", "report=[json,md,html]"]
    result = evalhydra.evaluate(args)
    assert result.exit_code == 0, result.stats
    (stat,) = result.stats
    assert (stat["n"], stat["passed"], stat["errors"]) == (200, 199, 1)
    rows = list(result.rows())
    poisoned = next(r for r in rows if r["case_id"] == "c057")
    assert poisoned["error_kind"] and not poisoned["passed"]
    again = evalhydra.evaluate(args)  # the rerun re-sends the one error and lives too
    assert again.exit_code == 0 and again.stats[0]["n"] == 200


def _return(value: object) -> Callable[..., object]:
    return lambda ctx, **kwargs: value


def test_a_matcher_result_the_store_cannot_hold_is_kept_readable(hostile_url: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A custom matcher's reason with a lone surrogate and details JSON cannot encode."""
    module = tmp_path / "odd_matchers.py"
    module.write_text("def odd(ctx, **kwargs):\n"
                      "    return {'passed': True, 'reason': 'ok \\ud800', 'details': {'seen': {1, 2}}}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = write_registry(
        tmp_path / "reg", evals={"g/e.json": smoke_eval("g.e", matcher={"kind": "custom",
                                                                         "_target_": "odd_matchers.odd"})},
        data={"data/g/e/test.jsonl": json.dumps({"id": "c1", "input": "Say OK.", "ideal": "OK"}) + "\n"})
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                                 "service.mock.enabled=false", f"service.base_url={hostile_url}",
                                 f"store.path={tmp_path / 's.db'}"])
    assert result.exit_code == 0
    store = open_store(tmp_path / "s.db", read_only=True)
    (row,) = store.conn.execute("select passed, details from results").fetchall()
    store.close()
    assert row[0] == 1 and "unencodable" in row[1]


@pytest.mark.parametrize("text", ['{"a": "\\ud800"}', "[" * 1000 + "]" * 1000, '"\ud800"',
                                  '{"a": ' * 150 + "1" + "}" * 150])
def test_json_from_outside_is_bounded_and_strict(text: str) -> None:
    for parse in (strictjson.loads, strictjson.loads_plain):
        with pytest.raises(ValueError):
            parse(text)
    with pytest.raises(ValueError):
        strictjson.loads(b'{"a": "' + SURROGATE + b'"}')
    assert strictjson.loads_plain('{"a": 1, "a": 2}') == {"a": 2}  # Python's rules otherwise


def test_a_reply_naming_another_model_keeps_the_target_asked_for(hostile_url: str, tmp_path: Path) -> None:
    """The endpoint answers "m" for "mock-model", as OpenAI answers a dated snapshot: one target."""
    registry = _registry(tmp_path / "reg", "none", cases=60)  # "POISON-none" poisons nothing
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                                 "service.mock.enabled=false", f"service.base_url={hostile_url}",
                                 f"store.path={tmp_path / 's.db'}"])
    assert result.exit_code == 0 and [s["model"] for s in result.stats] == ["mock-model"]
    assert {(r["model"], r["reply_model"]) for r in result.rows()} == {("mock-model", "m")}
    store = open_store(tmp_path / "s.db", read_only=True)
    write_run_reports(store, [str(result.run_id)], tmp_path / "out", formats=["md"], cumulative=False)
    store.close()
    assert "- **Reply named model**: m" in (tmp_path / "out" / "report.md").read_text()
