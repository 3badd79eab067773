"""The response cache (issue 32, items 4–5): a second eval with the same prompts sends nothing and
stores the same answers; whatever decides a reply misses; entries expire; concurrent runs and a
killed one leave a usable file; no secret reaches it.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import evalhydra
from evalhydra.core.errors import EvalHydraError
from evalhydra.services.cache import ResponseCache, cache_key, parse_expiry, request_scope
from tests.conftest import smoke_eval, write_registry
from tests.helpers import chat_requests, mock_call, numbered_registry, run_cli, start_cli, wait_for

SECRET = "sk-cache-test-0123456789abcdef"


def run(url: str, tmp_path: Path, store: str, *extra: str) -> list[dict[str, Any]]:
    registry = numbered_registry(tmp_path / "reg", 4)
    result = evalhydra.evaluate([f"registry={registry}", "eval=g.e", "service=mock",
                                 "service.mock.enabled=false", f"service.base_url={url}",
                                 f"store.path={tmp_path / store}", "cache.enabled=true",
                                 f"cache.path={tmp_path / 'cache.db'}", *extra])
    return sorted(result.rows(), key=lambda r: (r["case_id"], r["run_index"]))


def entries(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("select count(*) from responses").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.slow
def test_a_second_eval_with_the_same_prompts_sends_nothing(url: str, tmp_path: Path) -> None:
    first = run(url, tmp_path, "a.db", "trials=2", "service.pricing.output_per_mtok=10")
    sent = chat_requests(url)
    assert sent == 8 and entries(tmp_path / "cache.db") == 8
    again = run(url, tmp_path, "b.db", "trials=2", "service.pricing.output_per_mtok=10")  # another store
    assert chat_requests(url) == sent  # nothing sent
    assert [r["output"] for r in again] == [r["output"] for r in first]
    kept = [(r["finish_reason"], r["response_id"]) for r in again]  # the reply as it first came
    assert kept == [(r["finish_reason"], r["response_id"]) for r in first] and kept[0][1]
    assert all(r["cached"] == 1 and r["cost_usd"] == 0 for r in again)
    assert [r["saved_usd"] for r in again] == pytest.approx([r["cost_usd"] for r in first])
    # the original call's latency, kept apart (the cell's latency_ms also counts its scoring)
    pairs = zip(again, first, strict=True)
    assert all(0 < hit["cached_latency_ms"] <= fresh["latency_ms"] + 1 for hit, fresh in pairs)
    assert all(r["cached"] is None for r in first)
    report = run_cli("report", str(again[0]["run_id"]), "--store", str(tmp_path / "b.db"), "--out",
                     str(tmp_path / "rep"), "--format", "md,jsonl", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "; 8 from the response cache" in (tmp_path / "rep" / "report.md").read_text()
    assert json.loads((tmp_path / "rep" / "summary.json").read_text())["cache_hits"] == 8


_SLOW = pytest.mark.slow  # two runs each: the key's other parts are checked without a run below


@pytest.mark.parametrize(("change", "sent"), [
    ("service.model=other-model", 8), pytest.param("+service.params.temperature=0.7", 8, marks=_SLOW),
    pytest.param("service.system_prompt='Be terse.'", 8, marks=_SLOW),
    ("trials=3", 4),  # trials 1 and 2 hit; trial 3 of each case is a new sample
    # issue 47, item 5: a header value, the query string and how the reply is read decide it too
    ("+service.headers.X-Tenant=other", 8), pytest.param("service.reasoning.parse=false", 8, marks=_SLOW),
    pytest.param("service.reasoning.tags=['<reason>','</reason>']", 8, marks=_SLOW),
    pytest.param("service.base_url='{url}?deployment=b'", 8, marks=_SLOW),
])
def test_whatever_decides_a_reply_misses(change: str, sent: int, url: str, tmp_path: Path) -> None:
    run(url, tmp_path, "a.db", "trials=2")
    before = chat_requests(url)
    run(url, tmp_path, "b.db", "trials=2", change.format(url=url))
    assert chat_requests(url) - before == sent


def test_the_key_covers_endpoint_model_body_trial_and_system_prompt() -> None:
    base = ("http://a/v1/chat/completions", "m", b'{"messages":[]}', 1, None)
    variants = [("http://b/v1/chat/completions", *base[1:]), (base[0], "m2", *base[2:]),
                (*base[:2], b'{"messages":[1]}', *base[3:]), (*base[:3], 2, None), (*base[:4], "sys")]
    keys = {cache_key(*base), *(cache_key(*v) for v in variants)}
    assert len(keys) == 6
    scopes = [request_scope("http://a/v1/chat/completions?x=1", {}, True, ["<think>", "</think>"]),
              request_scope("http://a/v1/chat/completions?x=2", {}, True, ["<think>", "</think>"]),
              request_scope("http://a/v1/chat/completions?x=1", {"X-T": "1"}, True, ["<think>", "</think>"]),
              request_scope("http://a/v1/chat/completions?x=1", {}, False, ["<think>", "</think>"]),
              request_scope("http://a/v1/chat/completions?x=1", {}, True, ["<r>", "</r>"])]
    assert len({cache_key(*base, scope) for scope in scopes}) == 5


def test_trials_stay_independent_samples(url: str, tmp_path: Path) -> None:
    """A case answered at random per trial: each cached trial gives back its own answer."""
    lines = json.dumps({"id": "coin", "input": "Reply HEADS with probability 0.5.", "ideal": "HEADS"}) + "\n"
    registry = write_registry(tmp_path / "coin", evals={"g/e.json": smoke_eval()},
                              data={"data/g/e/test.jsonl": lines})
    common = [f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
              f"service.base_url={url}", "cache.enabled=true", f"cache.path={tmp_path / 'cache.db'}",
              "trials=12"]
    first = evalhydra.evaluate([*common, f"store.path={tmp_path / 'a.db'}"])
    again = evalhydra.evaluate([*common, f"store.path={tmp_path / 'b.db'}"])
    outputs = [r["output"] for r in sorted(first.rows(), key=lambda r: r["run_index"])]
    assert len(set(outputs)) == 2  # the trials differ...
    kept = [r["output"] for r in sorted(again.rows(), key=lambda r: r["run_index"])]
    assert kept == outputs  # ...and each trial is given back its own


def test_an_expired_entry_is_a_miss(url: str, tmp_path: Path) -> None:
    run(url, tmp_path, "a.db")
    conn = sqlite3.connect(tmp_path / "cache.db")
    conn.execute("update responses set created = created - 8 * 86400")
    conn.commit()
    conn.close()
    before = chat_requests(url)
    run(url, tmp_path, "b.db")  # cache.expiry defaults to 7 days
    assert chat_requests(url) - before == 4
    assert parse_expiry("12h") == 43200 and parse_expiry("90") == 90


@pytest.mark.slow
def test_judge_calls_are_cached_too(url: str, tmp_path: Path) -> None:
    grade = smoke_eval(matcher={"kind": "model_grade", "judge_service": "mock", "rubric": "Right?"})
    lines = "".join(json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}."}) + "\n"
                    for i in range(3))
    registry = write_registry(tmp_path / "judged", evals={"g/e.json": grade},
                              data={"data/g/e/test.jsonl": lines})
    common = [f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
              f"service.base_url={url}", "cache.enabled=true", f"cache.path={tmp_path / 'cache.db'}"]
    evalhydra.evaluate([*common, f"store.path={tmp_path / 'a.db'}"])
    assert chat_requests(url) == 6  # three answers, three verdicts
    again = evalhydra.evaluate([*common, f"store.path={tmp_path / 'b.db'}"])
    assert chat_requests(url) == 6 and all(r["passed"] == 1 for r in again.rows())
    evalhydra.evaluate([*common, f"store.path={tmp_path / 'c.db'}", "cache.judge=false"])
    assert chat_requests(url) == 9  # the verdicts are asked for again


def test_no_secret_reaches_the_cache_file(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CACHE_TEST_KEY", SECRET)
    run(url, tmp_path, "a.db", "service.api_key_env=CACHE_TEST_KEY",
        f"+service.headers.X-Team-Token={SECRET}x")
    assert mock_call(url, "last_headers")["authorization"] == f"Bearer {SECRET}"  # it was sent
    for path in tmp_path.glob("cache.db*"):
        assert SECRET.encode() not in path.read_bytes()


def test_a_hit_across_api_keys_stays_by_design(url: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CACHE_KEY_A", SECRET)
    monkeypatch.setenv("CACHE_KEY_B", SECRET + "b")
    run(url, tmp_path, "a.db", "service.api_key_env=CACHE_KEY_A")
    before = chat_requests(url)
    run(url, tmp_path, "b.db", "service.api_key_env=CACHE_KEY_B")
    assert chat_requests(url) == before


UNREADABLE = [
    "entry = 'not json'", pytest.param("entry = '[1, 2]'", marks=pytest.mark.slow),
    pytest.param("created = 'yesterday'", marks=pytest.mark.slow),
    pytest.param("entry = json_set(entry, '$.answer.usage', 'many')", marks=pytest.mark.slow),
    pytest.param("entry = json_set(entry, '$.answer.output', 5)", marks=pytest.mark.slow),
    pytest.param("entry = '{\"answer\": {}, \"latency_ms\": 1, \"pad\": \"'"
                 " || hex(zeroblob(13000000)) || '\"}'", marks=pytest.mark.slow),
]


@pytest.mark.slow
@pytest.mark.parametrize("damage", UNREADABLE)
def test_an_unreadable_entry_is_a_miss_warned_once(damage: str, url: str, tmp_path: Path) -> None:
    run(url, tmp_path, "a.db")
    conn = sqlite3.connect(tmp_path / "cache.db")
    with conn:
        conn.execute(f"update responses set {damage}")
    conn.close()
    before = chat_requests(url)
    registry = numbered_registry(tmp_path / "reg", 4)
    done = run_cli(f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
                   f"service.base_url={url}", f"store.path={tmp_path / 'b.db'}", "cache.enabled=true",
                   f"cache.path={tmp_path / 'cache.db'}", "run.progress=false", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert chat_requests(url) - before == 4  # each a miss, sent again...
    assert done.stderr.count("does not read") == 1  # ...and said once
    again = run(url, tmp_path, "c.db")  # the fresh answers replaced the damaged entries
    assert chat_requests(url) - before == 4 and all(r["cached"] == 1 for r in again)


@pytest.mark.slow
def test_a_cache_file_of_a_newer_layout_is_refused_naming_cache_path(url: str, tmp_path: Path) -> None:
    run(url, tmp_path, "a.db")
    conn = sqlite3.connect(tmp_path / "cache.db")
    conn.execute("pragma user_version = 99")
    conn.close()
    registry = numbered_registry(tmp_path / "reg", 4)
    done = run_cli(f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
                   f"service.base_url={url}", f"store.path={tmp_path / 'b.db'}", "cache.enabled=true",
                   f"cache.path={tmp_path / 'cache.db'}", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert f"cache.path={tmp_path / 'cache.db'}" in line and "newer evalhydra" in line


@pytest.mark.slow
def test_a_cache_another_process_keeps_locked_costs_a_warning_not_the_run(url: str, tmp_path: Path) -> None:
    run(url, tmp_path, "a.db")  # the file exists
    holder = sqlite3.connect(tmp_path / "cache.db", isolation_level=None)
    holder.execute("begin exclusive")  # another process's long write
    try:
        started = time.monotonic()
        registry = numbered_registry(tmp_path / "reg2", 40)
        done = run_cli(f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
                       f"service.base_url={url}", f"store.path={tmp_path / 'b.db'}", "cache.enabled=true",
                       f"cache.path={tmp_path / 'cache.db'}", "run.progress=false", cwd=tmp_path, timeout=60)
        took = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    assert done.returncode == 0, done.stderr
    assert "warning: cache.path=" in done.stderr and "not kept" in done.stderr
    assert took < 20  # never the old 30 s wait per write


def _open_at(path: Path, moment: float, errors: Any) -> None:
    """Open (and close) the cache at ``moment`` (spinning to it, as sleeping is too coarse)."""
    while time.time() < moment:
        pass
    try:
        ResponseCache(path, 3600).close()
    except EvalHydraError as exc:
        errors.put(str(exc))


def test_processes_opening_a_new_cache_at_the_same_instant_all_open_it(tmp_path: Path) -> None:
    # SQLite refuses all but one of the processes switching a new file to WAL at once, without
    # waiting: runs started together (a sweep's jobs) used to lose their cache with exit 2.
    fork = multiprocessing.get_context("fork")
    errors = fork.Queue()
    for attempt in range(10):
        moment = time.time() + 0.05
        procs = [fork.Process(target=_open_at, args=(tmp_path / f"{attempt}.db", moment, errors))
                 for _ in range(2)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(30)
            assert proc.exitcode == 0
        assert errors.empty(), errors.get()
        assert entries(tmp_path / f"{attempt}.db") == 0


@pytest.mark.slow
def test_concurrent_runs_share_one_file_and_a_killed_run_leaves_it_usable(url: str, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "many", 400)
    cache = tmp_path / "shared.db"

    def args(store: str, *extra: str) -> list[str]:
        return [f"registry={registry}", "eval=g.e", "service=mock", "service.mock.enabled=false",
                f"service.base_url={url}", f"store.path={tmp_path / store}", "cache.enabled=true",
                f"cache.path={cache}", "run.progress=false", *extra]

    mock_call(url, "config", {"latency_ms": 5})
    one, two = start_cli(*args("one.db"), cwd=tmp_path), start_cli(*args("two.db"), cwd=tmp_path)
    ends = [proc.communicate(timeout=120) for proc in (one, two)]
    assert [one.returncode, two.returncode] == [0, 0], ends
    assert entries(cache) == 400  # the same 400 requests, written by both, kept once
    sent = chat_requests(url)
    killed = start_cli(*args("three.db", "trials=2"), cwd=tmp_path)  # trial 2 is new: 400 writes
    wait_for(lambda: chat_requests(url) >= sent + 200, timeout=60)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    conn = sqlite3.connect(cache)
    assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
    conn.close()
    time.sleep(0.1)
    assert run_cli(*args("four.db", "trials=2"), cwd=tmp_path).returncode == 0
    assert entries(cache) == 800
