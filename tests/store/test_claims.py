"""Cell claims: two processes on one store split the pending cells and never send one twice."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
import trio
from omegaconf import DictConfig

from evalhydra.execute.runner import execute
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import count_cells
from evalhydra.services.mock import MockSettings, serve
from evalhydra.store.claims import Claims
from evalhydra.store.db import Batch, open_store
from tests.helpers import (
    chat_requests,
    mock_process,
    numbered_registry,
    result_row,
    run_cli,
    start_cli,
    stored_results,
    wait_for,
)


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    open_store(path).close()
    return path


_AT = "2026-01-01T00:00:00.000Z"


def test_a_second_run_gets_only_what_the_first_did_not_claim(tmp_path: Path) -> None:
    path = _store(tmp_path)
    first = Claims(path, "run-a", "2026-01-01T00:00:00.000Z", resend_errors=True)
    second = Claims(path, "run-b", "2026-01-01T00:00:00.000Z", resend_errors=True)
    assert first.claim(["k1", "k2"]).claimed == ["k1", "k2"]
    got = second.claim(["k1", "k2", "k3"])
    assert got.claimed == ["k3"] and got.held == {"k1": "run-a", "k2": "run-a"} and got.stored == []
    first.release()
    assert second.claim(["k1"]).claimed == ["k1"]  # released claims are free again
    first.close()
    second.close()


def test_an_expired_lease_is_taken_over(tmp_path: Path) -> None:
    path = _store(tmp_path)
    dead = Claims(path, "run-dead", "t", resend_errors=True, lease_s=-1.0)  # already expired
    assert dead.claim(["k1"]).claimed == ["k1"]
    alive = Claims(path, "run-b", "t", resend_errors=True)
    assert alive.claim(["k1"]).claimed == ["k1"]
    dead.close()
    alive.close()


def test_stored_results_are_not_claimed_and_errors_only_from_earlier_runs(tmp_path: Path) -> None:
    path = _store(tmp_path)
    store = open_store(path)
    store.write(
        Batch(
            results=[
                result_row("ok", "old", at=_AT),
                result_row("old-error", "old", error="timeout", at=_AT),
                result_row("new-error", "other", error="timeout", at="2026-06-01T00:00:00.000Z"),
            ]
        )
    )
    store.close()
    claims = Claims(path, "run-b", "2026-05-01T00:00:00.000Z", resend_errors=True)
    got = claims.claim(["ok", "old-error", "new-error", "fresh"])
    # an error stored before this run started is re-sent; one a concurrent run stored since is not
    assert got.claimed == ["old-error", "fresh"] and got.stored == ["ok", "new-error"]
    claims.close()
    keep = Claims(path, "run-c", "2026-05-01T00:00:00.000Z", resend_errors=False)
    assert keep.claim(["old-error"]).stored == ["old-error"]
    keep.close()


def test_a_claim_ends_in_the_transaction_that_stores_its_result_unless_it_is_an_error(
        tmp_path: Path) -> None:
    path = _store(tmp_path)
    mine = Claims(path, "run-a", _AT, resend_errors=True)
    theirs = Claims(path, "run-b", _AT, resend_errors=True)
    assert mine.claim(["ok", "err", "in-flight"]).claimed == ["ok", "err", "in-flight"]
    assert theirs.claim(["other"]).claimed == ["other"]
    store = open_store(path)
    store.write(Batch(results=[result_row("ok", "run-a"), result_row("err", "run-a", error="timeout"),
                               result_row("other", "run-b")]), claims_of="run-a")
    held = dict(store.conn.execute("select cell_key, run_id from claims"))
    # an error stays claimed until the run ends (a run resending errors must not take it
    # meanwhile), and another run's claim is that run's business
    assert held == {"err": "run-a", "in-flight": "run-a", "other": "run-b"}
    store.close()
    mine.close()
    theirs.close()


Compose = Callable[..., DictConfig]

#: One read: the claims, the results, and the claims on stored results.
_SAMPLE = """select (select count(*) from claims), (select count(*) from results),
  (select count(*) from claims join results using (cell_key))"""


async def test_a_run_holds_claims_only_on_cells_whose_results_are_not_stored(
        compose: Compose, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 60)
    samples: list[tuple[int, int, int]] = []
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, MockSettings(latency_ms=20))
        plan = build_plan(compose("service=mock", "service.mock.enabled=false",
                                  f"service.base_url={server.url}", "eval=g", f"registry={registry}",
                                  "run.concurrency=4", "run.batch_size=2"))
        store = open_store(plan.store_path)

        async def sample() -> None:
            with closing(sqlite3.connect(plan.store_path)) as conn:
                while True:
                    samples.append(conn.execute(_SAMPLE).fetchone())
                    await trio.sleep(0.005)

        nursery.start_soon(sample)
        outcome = await execute(plan, store, total=count_cells(plan))
        nursery.cancel_scope.cancel()
    assert outcome.executed == 60 and outcome.errors == 0
    assert all(on_stored == 0 for _, _, on_stored in samples), samples
    assert any(claims and 0 < stored < 60 for claims, stored, _ in samples), samples  # seen mid-run
    assert store.conn.execute("select count(*) from claims").fetchone()[0] == 0
    store.close()


def test_claims_of_a_dead_process_are_released_when_the_store_is_opened(tmp_path: Path) -> None:
    path = _store(tmp_path)
    store = open_store(path)
    store.start_run(
        {
            "run_id": "run-dead",
            "status": "running",
            "started_at": "t",
            "hostname": os.uname().nodename,
            "pid": _dead_pid(),
        }
    )
    store.close()
    claims = Claims(path, "run-dead", "t", resend_errors=True)
    claims.claim(["k1"])
    claims.close()
    open_store(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("select count(*) from claims").fetchone()[0] == 0
    assert conn.execute("select status from runs").fetchone()[0] == "interrupted"
    conn.close()


def test_renewal_extends_the_lease(tmp_path: Path) -> None:
    path = _store(tmp_path)
    claims = Claims(path, "run-a", "t", resend_errors=True, lease_s=0.3)
    claims.claim(["k1"])
    claims.start_renewing()
    time.sleep(0.6)  # twice the lease: only renewal keeps the claim
    other = Claims(path, "run-b", "t", resend_errors=True)
    assert other.claim(["k1"]).held == {"k1": "run-a"}
    claims.close()
    other.close()


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def _run_now(stdout: str) -> int:
    match = re.search(r"\((\d+) run now, (\d+) resumed", stdout)
    assert match, stdout
    return int(match.group(1))


@pytest.mark.slow
def test_two_processes_on_one_store_send_each_cell_once(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 80)
    with mock_process("--latency-ms", "100") as url:
        args = (
            f"registry={registry}",
            "eval=g",
            "service=mock",
            "service.mock.enabled=false",
            f"service.base_url={url}",
            "run.concurrency=4",
            "run.progress=false",
            f"store.path={tmp_path / 'shared.db'}",
        )
        procs = [start_cli(*args, cwd=tmp_path) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert chat_requests(url) == 80
        assert stored_results(tmp_path / "shared.db") == 80
        ran = [_run_now(stdout) for stdout, _ in outs]
        assert sum(ran) == 80 and min(ran) > 0, outs  # both worked, neither twice
        assert any("left to run" in stdout for stdout, _ in outs), outs
        again = run_cli(*args, cwd=tmp_path)
        assert again.returncode == 0 and _run_now(again.stdout) == 0
        assert chat_requests(url) == 80


@pytest.mark.slow
def test_cells_claimed_by_a_killed_process_run_on_the_next_invocation(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 20)
    db = tmp_path / "s.db"
    with mock_process("--latency-ms", "400") as url:
        args = (
            f"registry={registry}",
            "eval=g",
            "service=mock",
            "service.mock.enabled=false",
            f"service.base_url={url}",
            "run.concurrency=2",
            "run.progress=false",
            f"store.path={db}",
        )
        proc = start_cli(*args, cwd=tmp_path)
        wait_for(lambda: stored_results(db) >= 2)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        res = run_cli(*args, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert "left to run" not in res.stdout and "nothing to claim" not in res.stdout
        assert stored_results(db) == 20
