"""Batch mode (issue 34) end to end against the mock's Files and Batches API: the lines, the
answers, the price, partial outcomes, and a crash, a cancel or a server restart between submission
and collection that never makes a cell paid for twice or stored twice.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import evalhydra
from evalhydra.store.views import latest_version_sql
from tests.conftest import smoke_eval, write_registry
from tests.helpers import (
    chat_requests,
    free_port,
    litellm_in_front_of,
    mock_call,
    mock_process,
    numbered_registry,
    run_cli,
    start_cli,
    wait_for,
)

FAST = ["service.batch.poll_interval_s=0.05", "run.progress=false"]


def overrides(url: str, tmp_path: Path, n: int = 4, store: str = "s.db", *extra: str) -> list[str]:
    registry = numbered_registry(tmp_path / "reg", n)
    return [
        f"registry={registry}",
        "eval=g.e",
        "service=mock",
        "service.mock.enabled=false",
        f"service.base_url={url}",
        f"store.path={tmp_path / store}",
        "service.batch.enabled=true",
        *FAST,
        *extra,
    ]


def evaluate(url: str, tmp_path: Path, n: int = 4, store: str = "s.db", *extra: str) -> Any:
    return evalhydra.evaluate(overrides(url, tmp_path, n, store, *extra))


def rows(db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(  # each cell's newest version
            f"select * from results where {latest_version_sql()} order by case_id, run_index")]
    finally:
        conn.close()


def ledger(db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("select * from batches order by created_at")]
    except sqlite3.OperationalError:  # the store is not migrated yet
        return []
    finally:
        conn.close()


def batches_at(url: str) -> list[dict[str, Any]]:
    """Every batch the mock has, oldest first."""
    found = httpx.get(f"{url}/batches", params={"limit": 1000}).json()["data"]
    return list(reversed(found))


def input_lines(url: str, batch: dict[str, Any]) -> list[dict[str, Any]]:
    text = httpx.get(f"{url}/files/{batch['input_file_id']}/content").text
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.slow
def test_batch_answers_equal_online_ones_at_the_discount(url: str, tmp_path: Path) -> None:
    price = ["service.pricing.input_per_mtok=3", "service.pricing.output_per_mtok=15"]
    online = evaluate(url, tmp_path, 4, "online.db", "service.batch.enabled=false", "trials=2", *price)
    assert online.exit_code == 0 and chat_requests(url) == 8
    mock_call(url, "reset", {})
    batched = evaluate(url, tmp_path, 4, "batch.db", "trials=2", *price)
    assert batched.exit_code == 0
    assert chat_requests(url) == 0 and mock_call(url, "stats")["batch_lines"] == 8  # nothing online
    got, want = rows(tmp_path / "batch.db"), rows(tmp_path / "online.db")
    assert [(r["case_id"], r["run_index"], r["output"], r["passed"]) for r in got] == [
        (r["case_id"], r["run_index"], r["output"], r["passed"]) for r in want
    ]
    assert {r["cell_key"] for r in got} == {r["cell_key"] for r in want}  # the same cells
    assert all(r["batched"] == 1 and r["attempt_count"] == 1 for r in got)
    assert [r["cost_usd"] for r in got] == pytest.approx([r["cost_usd"] / 2 for r in want])
    assert [r["saved_usd"] for r in got] == pytest.approx([r["cost_usd"] / 2 for r in want])
    assert all(r["cost_usd"] > 0 for r in got)
    (done,) = batches_at(url)
    assert done["status"] == "completed" and done["request_counts"]["total"] == 8
    assert done["metadata"]["evalhydra_run"] == batched.run_id
    (recorded,) = ledger(tmp_path / "batch.db")
    assert (recorded["batch_id"], recorded["status"], recorded["lines"]) == (done["id"], "completed", 8)
    assert sorted(json.loads(recorded["custom_ids"])) == sorted(r["cell_key"] for r in got)
    # the files were deleted at the provider once downloaded
    assert httpx.get(f"{url}/files").json()["data"] == []


@pytest.mark.slow
def test_a_batch_line_is_exactly_the_online_request(url: str, tmp_path: Path) -> None:
    params = ["+service.params.temperature=0", "+service.params.max_tokens=7"]
    assert evaluate(url, tmp_path, 1, "online.db", "service.batch.enabled=false", *params).exit_code == 0
    sent_online = mock_call(url, "last")
    assert evaluate(url, tmp_path, 1, "batch.db", "service.batch.keep_files=true", *params).exit_code == 0
    (batch,) = batches_at(url)
    (line,) = input_lines(url, batch)
    (row,) = rows(tmp_path / "batch.db")
    assert line == {
        "custom_id": row["cell_key"],
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": sent_online,
    }
    assert sent_online["temperature"] == 0 and sent_online["max_tokens"] == 7


@pytest.mark.slow
def test_files_are_split_by_lines_and_by_bytes(url: str, tmp_path: Path) -> None:
    assert evaluate(url, tmp_path, 7, "lines.db", "service.batch.max_requests=3").exit_code == 0
    assert sorted(b["request_counts"]["total"] for b in batches_at(url)) == [1, 3, 3]  # submitted at once
    mock_call(url, "reset", {})
    result = evaluate(
        url, tmp_path, 7, "bytes.db", "service.batch.max_bytes=1100", "service.batch.keep_files=true"
    )
    assert result.exit_code == 0
    sizes = [len(httpx.get(f"{url}/files/{b['input_file_id']}/content").content) for b in batches_at(url)]
    assert (
        len(sizes) > 1
        and max(sizes) <= 1100
        and sum(b["request_counts"]["total"] for b in batches_at(url)) == 7
    )
    assert len(rows(tmp_path / "bytes.db")) == 7


@pytest.mark.slow
def test_failed_lines_are_infrastructure_errors_and_a_rerun_sends_only_those(
    url: str, tmp_path: Path
) -> None:
    mock_call(url, "config", {"batch_fail_every": 3})
    first = evaluate(url, tmp_path, 6)
    stored = rows(tmp_path / "s.db")
    failed = {r["cell_key"] for r in stored if r["error_kind"]}
    assert len(failed) == 2 and {r["error_kind"] for r in stored if r["error_kind"]} == {"batch_line_failed"}
    assert all("mock: this line failed" in r["failure_reason"] for r in stored if r["error_kind"])
    assert all(r["status"] == "ERROR" for r in stored if r["error_kind"])  # never a wrong answer
    assert first.exit_code == 0  # 2 of 6 errors is under run.max_error_rate
    mock_call(url, "config", {"batch_fail_every": 0})
    assert evaluate(url, tmp_path, 6, "s.db", "service.batch.keep_files=true").exit_code == 0
    first_batch, retry = batches_at(url)
    assert {line["custom_id"] for line in input_lines(url, retry)} == failed
    again = rows(tmp_path / "s.db")
    assert len(again) == 6 and all(r["passed"] == 1 for r in again)


@pytest.mark.slow
def test_fallback_online_sends_the_failed_lines_online(url: str, tmp_path: Path) -> None:
    mock_call(url, "config", {"batch_fail_every": 2})
    evaluate(url, tmp_path, 4)
    mock_call(url, "config", {"batch_fail_every": 0})
    assert evaluate(url, tmp_path, 4, "s.db", "service.batch.fallback=online").exit_code == 0
    assert len(batches_at(url)) == 1 and chat_requests(url) == 2  # the two failed cells, online
    stored = rows(tmp_path / "s.db")
    assert all(r["passed"] == 1 for r in stored)
    assert sorted(r["batched"] or 0 for r in stored) == [0, 0, 1, 1]


@pytest.mark.slow
def test_resubmit_failed_sends_a_failed_line_again_within_the_run(url: str, tmp_path: Path) -> None:
    mock_call(url, "config", {"batch_fail_every": 4})
    assert evaluate(url, tmp_path, 4, "s.db", "service.batch.resubmit_failed=true").exit_code == 0
    assert [b["request_counts"]["total"] for b in batches_at(url)] == [4, 1]
    assert all(r["passed"] == 1 for r in rows(tmp_path / "s.db"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("outcome", "kinds", "code"),
    [
        ("expired", [None, None, "batch_expired", "batch_expired"], 0),
        ("failed", ["batch_failed"] * 4, 3),
    ],
)
def test_an_expired_or_failed_batch_keeps_what_was_done(
    url: str, tmp_path: Path, outcome: str, kinds: list[str | None], code: int
) -> None:
    mock_call(url, "config", {"batch_outcome": outcome})
    assert evaluate(url, tmp_path, 4).exit_code == code
    stored = rows(tmp_path / "s.db")
    assert sorted((r["error_kind"] for r in stored), key=str) == sorted(kinds, key=str)
    assert all(r["passed"] == 1 for r in stored if not r["error_kind"])
    if outcome == "failed":
        assert all("failed validation" in r["failure_reason"] for r in stored)


@pytest.mark.slow
def test_the_summary_says_what_batch_mode_saved(url: str, tmp_path: Path) -> None:
    proc = run_cli(*overrides(url, tmp_path, 3, "s.db", "service.pricing.output_per_mtok=20"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("batch:")]
    saved = sum(r["saved_usd"] for r in rows(tmp_path / "s.db"))
    assert (
        line
        == f"batch: 3 cells answered through batch jobs, ${saved:.4f} paid, ${saved:.4f} saved"
        " against the online price"
    )
    listing = run_cli("batches", "--store", str(tmp_path / "s.db"), "--format", "json", cwd=tmp_path)
    (listed,) = json.loads(listing.stdout)
    assert (listed["batch"], listed["status"], listed["lines"]) == (batches_at(url)[0]["id"], "completed", 3)


@pytest.mark.slow
def test_run_max_cost_holds_a_batch_back_before_it_is_submitted(url: str, tmp_path: Path) -> None:
    proc = run_cli(
        *overrides(
            url, tmp_path, 4, "s.db", "service.pricing.input_per_mtok=1000", "run.max_cost_usd=0.0001"
        ),
        cwd=tmp_path,
    )
    assert proc.returncode == 3
    assert "would pass run.max_cost_usd" in proc.stderr and "4 cells not stored" in proc.stderr
    assert batches_at(url) == [] and rows(tmp_path / "s.db") == []
    dry = run_cli(
        *overrides(url, tmp_path, 4, "s.db", "service.pricing.input_per_mtok=1000", "run.dry_run=true"),
        cwd=tmp_path,
    )
    assert "in batch jobs at 50% of the online price" in dry.stdout


@pytest.mark.slow
def test_a_model_graded_eval_sends_its_judge_calls_in_batches_too(url: str, tmp_path: Path) -> None:
    judge = {
        "name": "batch_judge",
        "base_url": url,
        "default_model": "judge-model",
        "timeout_ms": 10000,
        "batch": {"enabled": True, "poll_interval_s": 0.05},
    }
    graded = smoke_eval(
        "g.graded",
        "data/g/graded/test.jsonl",
        matcher={
            "kind": "model_grade",
            "judge_service": "batch_judge",
            "rubric": "Exact answer.",
            "pass_score": 0.5,
        },
    )
    lines = "".join(
        json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}.", "ideal": f"V{i}"}) + "\n"
        for i in range(3)
    )
    registry = write_registry(
        tmp_path / "reg",
        evals={"g/graded.json": graded},
        services=[judge],
        data={"data/g/graded/test.jsonl": lines},
    )
    result = evalhydra.evaluate(
        [
            f"registry={registry}",
            "eval=g.graded",
            "service=mock",
            "service.mock.enabled=false",
            f"service.base_url={url}",
            f"store.path={tmp_path / 's.db'}",
            "service.batch.enabled=true",
            *FAST,
        ]
    )
    assert result.exit_code == 0
    stored = rows(tmp_path / "s.db")
    assert all(r["passed"] == 1 and r["judge_service"] == "batch_judge" for r in stored)
    assert chat_requests(url) == 0
    candidates, judges = batches_at(url)
    keys = {r["cell_key"] for r in stored}
    recorded = {b["service"]: json.loads(b["custom_ids"]) for b in ledger(tmp_path / "s.db")}
    assert set(recorded["mock"]) == keys and set(recorded["batch_judge"]) == {f"{k}#1" for k in keys}
    assert candidates["request_counts"]["total"] == judges["request_counts"]["total"] == 3


@pytest.mark.slow
def test_batch_mode_on_an_agent_cli_is_refused(tmp_path: Path, fake_agent_cli: Path) -> None:
    proc = run_cli(
        "service=fake_agent",
        "eval=agent_cases",
        "service.batch.enabled=true",
        f"store.path={tmp_path / 's.db'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: service 'fake_agent'") and "agent CLI" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "s.db").exists()


# -- durability -------------------------------------------------------------------------------------


def wait_for_batch(db: Path, status: str = "in_progress") -> dict[str, Any]:
    wait_for(lambda: any(b["status"] == status for b in ledger(db)), timeout=60)
    return next(b for b in ledger(db) if b["status"] == status)


@pytest.mark.slow
@pytest.mark.parametrize(("stop", "code", "rerun_batch"), [
    (signal.SIGKILL, -signal.SIGKILL, "true"),
    (signal.SIGINT, 130, "false"),  # Ctrl-C: interrupted, the batch left pending
])
def test_a_rerun_after_kill_collects_the_pending_batch_instead_of_paying_again(
    url: str, tmp_path: Path, stop: int, code: int, rerun_batch: str
) -> None:
    mock_call(url, "config", {"batch_delay_s": 2.0})
    proc = start_cli(*overrides(url, tmp_path, 5), cwd=tmp_path)
    recorded = wait_for_batch(tmp_path / "s.db")
    proc.send_signal(stop)
    proc.communicate(timeout=30)
    assert proc.returncode == code
    assert rows(tmp_path / "s.db") == []
    # the rerun (batch mode on, or off: pending batches are adopted either way) waits on the same batch
    result = evaluate(url, tmp_path, 5, "s.db", f"service.batch.enabled={rerun_batch}")
    assert result.exit_code == 0
    assert [b["id"] for b in batches_at(url)] == [recorded["batch_id"]]  # no second batch
    assert chat_requests(url) == 0 and mock_call(url, "stats")["batch_lines"] == 5
    stored = rows(tmp_path / "s.db")
    assert len(stored) == 5 and all(r["passed"] == 1 and r["batched"] == 1 for r in stored)
    assert all(r["latency_ms"] >= 1500 for r in stored)  # from the first run's submission
    third = evaluate(url, tmp_path, 5)  # nothing left: the batch is done, nothing is sent
    assert third.exit_code == 0 and len(batches_at(url)) == 1
    assert [b["status"] for b in ledger(tmp_path / "s.db")] == ["done"]


@pytest.mark.slow
def test_a_batch_created_just_before_a_crash_is_found_by_its_tag(url: str, tmp_path: Path) -> None:
    """The run recorded the batch, created it, and died before writing its id: the rerun finds
    it among the provider's batches by the metadata tag and adopts it."""
    mock_call(url, "config", {"batch_delay_s": 0.3})
    result = evaluate(url, tmp_path, 3, "s.db", "service.batch.keep_files=true")
    (recorded,) = ledger(tmp_path / "s.db")
    conn = sqlite3.connect(tmp_path / "s.db")
    with conn:  # the crash: no result stored, the batch's id never written
        conn.execute("delete from results")
        conn.execute("delete from run_cells")
        conn.execute(
            "update batches set batch_id = null, status = 'submitting', output = null, errors = null,"
            " collected_at = null"
        )
    conn.close()
    assert result.exit_code == 0
    again = evaluate(url, tmp_path, 3)
    assert again.exit_code == 0 and len(batches_at(url)) == 1
    (adopted,) = ledger(tmp_path / "s.db")
    assert adopted["batch_id"] == recorded["batch_id"]
    assert len(rows(tmp_path / "s.db")) == 3


@pytest.mark.slow
def test_evalhydra_batches_cancel_ends_a_pending_batch_as_cancelled_errors(url: str, tmp_path: Path) -> None:
    mock_call(url, "config", {"batch_outcome": "stuck"})
    proc = start_cli(*overrides(url, tmp_path, 3), cwd=tmp_path)
    wait_for_batch(tmp_path / "s.db")
    cancel = run_cli("batches", "cancel", "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert cancel.returncode == 0 and cancel.stdout.rstrip().endswith(": cancelled"), cancel.stdout
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err  # every cell an infrastructure error: nothing measured
    assert {r["error_kind"] for r in rows(tmp_path / "s.db")} == {"batch_cancelled"}
    mock_call(url, "config", {"batch_outcome": None})
    assert evaluate(url, tmp_path, 3).exit_code == 0  # the rerun sends them again, in a new batch
    assert len(batches_at(url)) == 2 and all(r["passed"] == 1 for r in rows(tmp_path / "s.db"))


@pytest.mark.slow
def test_a_server_restart_while_polling_is_survived(tmp_path: Path) -> None:
    port = free_port()
    with mock_process("--port", str(port), "--batch-delay-s", "5") as url:
        proc = start_cli(
            *overrides(url, tmp_path, 4, "s.db", "service.batch.poll_timeout_s=60"), cwd=tmp_path
        )
        wait_for_batch(tmp_path / "s.db")
    time.sleep(1.0)  # polls fail: connection refused, tried again with backoff
    with mock_process("--port", str(port)) as again:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        # the new server did not know the batch: its cells went out in a new batch, each stored once
        assert len(batches_at(again)) == 1 and batches_at(again)[0]["request_counts"]["total"] == 4
    stored = rows(tmp_path / "s.db")
    assert len(stored) == 4 and all(r["passed"] == 1 for r in stored)
    assert [b["status"] for b in ledger(tmp_path / "s.db")] == ["lost", "completed"]


@pytest.mark.slow
def test_polls_failing_past_the_timeout_leave_the_batch_for_a_rerun(tmp_path: Path) -> None:
    port = free_port()
    with mock_process("--port", str(port), "--batch-delay-s", "30") as url:
        proc = start_cli(*overrides(url, tmp_path, 3, "s.db", "service.batch.poll_timeout_s=1"), cwd=tmp_path)
        wait_for_batch(tmp_path / "s.db")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert "3 cells not stored" in err and "a rerun collects it" in err
    assert rows(tmp_path / "s.db") == []
    assert [b["status"] for b in ledger(tmp_path / "s.db")] == ["in_progress"]  # kept for a rerun


@pytest.mark.slow
def test_two_processes_on_one_store_send_each_cell_once(url: str, tmp_path: Path) -> None:
    mock_call(url, "config", {"batch_delay_s": 0.5})
    args = overrides(url, tmp_path, 60)
    one, two = start_cli(*args, cwd=tmp_path), start_cli(*args, cwd=tmp_path)
    for proc in (one, two):
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    assert sum(b["request_counts"]["total"] for b in batches_at(url)) == 60
    assert len(rows(tmp_path / "s.db")) == 60


# -- through LiteLLM's proxy ------------------------------------------------------------------------

PROXY_KEY = "sk-proxy-master-0123456789abcdef"


@pytest.fixture
def litellm_proxy(url: str, tmp_path: Path) -> Iterator[str]:
    """LiteLLM's proxy (a server no one here wrote) in front of the mock, for chat, files and batches."""
    with litellm_in_front_of(url, tmp_path, PROXY_KEY) as base:
        yield base


@pytest.mark.slow
def test_batches_through_litellms_proxy(url: str, tmp_path: Path, litellm_proxy: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROXY_KEY", PROXY_KEY)
    args = overrides(litellm_proxy, tmp_path, 4, "s.db", "service.api_key_env=PROXY_KEY", "trials=2")
    result = evalhydra.evaluate(args)
    assert result.exit_code == 0
    stored = rows(tmp_path / "s.db")
    assert len(stored) == 8 and all(r["passed"] == 1 and r["batched"] == 1 for r in stored)
    (batch,) = batches_at(url)  # the proxy handed the batch on to the mock
    assert batch["status"] == "completed" and batch["request_counts"]["total"] == 8
    assert chat_requests(url) == 0
    (recorded,) = ledger(tmp_path / "s.db")
    assert recorded["status"] == "completed" and recorded["api_key_env"] == "PROXY_KEY"
    assert PROXY_KEY.encode() not in (tmp_path / "s.db").read_bytes()


@pytest.mark.slow
def test_the_responses_api_through_litellms_proxy(url: str, tmp_path: Path, litellm_proxy: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49: ``service.api=responses`` against LiteLLM's proxy, which hands ``/v1/responses`` on
    to the mock."""
    monkeypatch.setenv("PROXY_KEY", PROXY_KEY)
    args = [a for a in overrides(litellm_proxy, tmp_path, 3, "s.db") if not a.startswith("service.batch")]
    result = evalhydra.evaluate([*args, "service.api_key_env=PROXY_KEY", "service.api=responses"])
    stored = rows(tmp_path / "s.db")
    assert result.exit_code == 0 and [r["passed"] for r in stored] == [1, 1, 1]
    assert all(r["prompt_tokens"] > 0 for r in stored)
    assert chat_requests(url) == 3  # the mock answered each (its chat logic counts responses too)
