"""Issue 63, items 5 and 7: the simulator audit over a real store of conversations (the mock
playing users that stop early in some of them): the queue takes failures first with a quarter on
passes, audits are taken only from a page the viewer's token opened, fifty conversations are
audited by keyboard alone in headless Chromium, and calibrate reports each agent's pass rate
corrected for the simulator's errors."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import evalhydra
from evalhydra.analysis.simulator_audit import audit_queue, simulator_corrections
from evalhydra.store.audits import save_audit
from evalhydra.store.db import immediate, open_store
from tests.conftest import smoke_eval, write_registry
from tests.viewer.test_viewer import base_of, browser, start_viewer, stop

__all__ = ["browser"]  # the fixture, shared

CASES = 60
CONFIRM = "Yes, go ahead."


def _registry(root: Path) -> Path:
    """Sixty conversations: the user asks, the mock agent answers, the user confirms, the agent
    says done. A user that stops early never confirms, so the agent cannot finish."""
    lines = []
    for i in range(CASES):
        turns = [f"Please do task {i}. Reply with exactly Shall I do task {i}?",
                 f"{CONFIRM} Reply with exactly done {i}."]
        case = {"id": f"c{i:02d}", "ideal": f"done {i}", "user": {"script": {"turns": turns}}}
        lines.append(json.dumps(case))
    spec = smoke_eval("talk.tasks", "data/talk/test.jsonl", user={"mock": {"error_rate": 0.3, "seed": 1}})
    data = {"data/talk/test.jsonl": "\n".join(lines)}
    return write_registry(root, evals={"talk/tasks.json": spec}, data=data)


@pytest.fixture(scope="module")
def conversations(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("talk")
    result = evalhydra.evaluate([f"registry={_registry(root / 'reg')}", "eval=talk.tasks",
                                 f"store.path={root / 's.db'}", f"hydra.run.dir={root / 'out'}"])
    assert result.run_id is not None and 0 < result.stats[0]["passed"] < CASES
    return root / "s.db", result.run_id


def _broke(transcript: list[dict]) -> bool:
    """The truth a person reads off the dialogue: the user never confirmed."""
    return not any(m["role"] == "user" and CONFIRM in str(m["content"]) for m in transcript)


def _copy(store: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "s.db"
    with sqlite3.connect(store) as source:
        source.execute("vacuum into ?", [str(copy)])
    return copy


def test_the_queue_audits_failures_first_with_a_quarter_on_passes(conversations: tuple[Path, str]) -> None:
    store = open_store(conversations[0], read_only=True)
    queue = audit_queue(store.conn, [conversations[1]])
    store.close()
    assert len(queue) == CASES
    failures, passes = sum(not q.passed for q in queue), sum(q.passed for q in queue)
    expected: list[bool] = []
    while len(expected) < CASES:  # three failures, then a pass, while both last
        left = failures - expected.count(False)
        expected += [False] * min(3, left) + [True] * min(1, passes - expected.count(True))
    assert [q.passed for q in queue] == expected and 0 < failures < CASES
    assert [q.position for q in queue] == list(range(CASES))


@pytest.mark.slow
def test_an_audit_is_taken_only_from_a_page_the_token_opened(conversations: tuple[Path, str],
                                                             tmp_path: Path) -> None:
    path = _copy(conversations[0], tmp_path)
    proc, url = start_viewer(path, "--labeller", "ana")
    try:
        base = base_of(url)
        assert httpx.post(base + "/api/audits", json={}).status_code == 403  # no cookie, no key
        with httpx.Client(base_url=base, follow_redirects=True) as client:
            page = client.get(url.split(base, 1)[1] if "?" in url else "/")
            assert page.status_code == 200
            assert 'id="simulators"' not in client.get(f"/runs/{conversations[1]}").text  # nothing audited
            shown = client.get(f"/runs/{conversations[1]}/audit")
            assert shown.status_code == 200 and 'id="auditing"' in shown.text
            assert "simulated user" in shown.text
            key = shown.text.split('data-key="', 1)[1].split('"', 1)[0]
            sha = shown.text.split('data-sha="', 1)[1].split('"', 1)[0]
            case = shown.text.split('data-case="', 1)[1].split('"', 1)[0]
            body = {"eval": "talk.tasks", "case": case, "transcript_sha256": sha, "broke": True,
                    "kind": "premature_stop"}
            assert client.post("/api/audits", json=body).status_code == 403  # the cookie alone
            headers = {"x-evalhydra-label": key}
            bad = client.post("/api/audits", json={**body, "kind": "boredom"}, headers=headers)
            assert bad.status_code == 400 and "'kind' must be one of" in bad.json()["error"]
            wrong = client.post("/api/audits", json={**body, "transcript_sha256": "0" * 64}, headers=headers)
            assert wrong.status_code == 400 and "no stored conversation" in wrong.json()["error"]
            stored = client.post("/api/audits", json=body, headers=headers).json()
            assert stored == {"stored": "broke: premature_stop"}
            run_page = client.get(f"/runs/{conversations[1]}").text
            assert 'id="simulators"' in run_page and "1 / 1" in run_page  # one failure audited, broken
            case_page = client.get(f"/runs/{conversations[1]}/case",
                                   params={"eval": "talk.tasks", "case": case})
            assert "dialogue with a simulated user" in case_page.text and 'id="audit-queue"' in case_page.text
            assert ">simulated user</div>" in case_page.text and ">agent</div>" in case_page.text
    finally:
        stop(proc)
    store = open_store(path, read_only=True)
    rows = store.conn.execute("select case_id, broke, kind, labeller from simulator_audits").fetchall()
    store.close()
    assert rows == [(case, 1, "premature_stop", "ana")]


@pytest.mark.slow
def test_the_correction_leaves_out_what_the_simulator_broke(conversations: tuple[Path, str],
                                                           tmp_path: Path) -> None:
    path = _copy(conversations[0], tmp_path)
    store = open_store(path)
    rows = store.conn.execute("select case_id, passed, json_extract(details, '$.trajectory.transcript')"
                              " from results").fetchall()
    from evalhydra.store.audits import transcript_sha256

    with immediate(store.conn):
        for case_id, _, transcript in rows:
            broke = _broke(json.loads(transcript))
            save_audit(store.conn, {"eval": "talk.tasks", "case": case_id, "broke": broke,
                                    "transcript_sha256": transcript_sha256(transcript),
                                    "kind": "premature_stop" if broke else None}, "ana")
    (row,) = simulator_corrections(store.conn, [conversations[1]])
    store.close()
    failures = sum(1 for _, passed, _ in rows if not passed)
    assert row["audited_failures"] == failures and row["broken_failures"] == failures  # every failure broken
    assert row["raw_pass_rate"] < 0.9 and row["corrected_pass_rate"] == 1.0  # the agent never erred
    assert row["corrected_ci_low"] > row["raw_pass_rate"] and row["kinds"] == {"premature_stop": failures}
    argv = [sys.executable, "-m", "evalhydra", "calibrate", conversations[1], "--store", str(path)]
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "corrected for the simulated user's errors" in shown.stdout
    assert f"{failures}/{failures}" in shown.stdout and "premature_stop" in shown.stdout


@pytest.mark.slow
def test_fifty_conversations_audited_by_keyboard_alone(conversations: tuple[Path, str], tmp_path: Path,
                                                       browser: object) -> None:
    """From the audit queue: o marks a conversation fine, 1 a premature stop; each opens the next;
    50 times, no mouse. The audits are stored as pressed and calibrate corrects with them."""
    path = _copy(conversations[0], tmp_path)
    proc, url = start_viewer(path, "--labeller", "ana")
    try:
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(url)
        page.goto(base_of(url) + f"/runs/{conversations[1]}/audit")
        pressed: dict[str, bool] = {}
        for n in range(50):
            page.wait_for_selector("#auditing")
            case = page.locator("#auditing").get_attribute("data-case") or ""
            assert case not in pressed
            turns = [t.lower() for t in page.locator("#dialogue .turn .role").all_inner_texts()]
            assert turns[0] == "agent" and "simulated user" in turns  # a dialogue, each side named
            said = page.locator("#dialogue").inner_text()
            pressed[case] = CONFIRM not in said
            with page.expect_navigation():
                page.keyboard.press("1" if pressed[case] else "o")
            assert n == 49 or "/audit" in page.url
        assert "50 of 60 conversations audited" in page.locator("#audit-count").inner_text()
    finally:
        stop(proc)
    store = open_store(path, read_only=True)
    stored = {c: bool(b) for c, b, who in store.conn.execute(
        "select case_id, broke, labeller from simulator_audits") if who == "ana"}
    (row,) = simulator_corrections(store.conn, [conversations[1]])
    store.close()
    assert stored == pressed
    assert row["audited_failures"] + row["audited_passes"] == 50 and row["broken_passes"] == 0
