"""The runner in-process: limits, timeouts on trio's autojump clock, sweeps, interrupted runs."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from omegaconf import DictConfig

from evalhydra.execute.runner import execute
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import count_cells
from evalhydra.services.mock import MockSettings, serve
from evalhydra.store.db import open_store
from tests.helpers import numbered_registry

Compose = Callable[..., DictConfig]


async def test_hang_past_timeout_is_a_timeout_error_in_virtual_time(
    compose: Compose, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    registry = numbered_registry(tmp_path / "reg", 4)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, MockSettings(fault="hang"))
        plan = build_plan(
            compose(
                f"registry={registry}",
                "service=mock",
                "service.mock.enabled=false",
                f"service.base_url={server.url}",
                "service.timeout_ms=30000",
                "service.retry.max_attempts=2",
                "eval=g",
            )
        )
        store = open_store(plan.store_path)
        start = trio.current_time()
        outcome = await execute(plan, store, total=count_cells(plan))
        elapsed = trio.current_time() - start
        nursery.cancel_scope.cancel()
    assert outcome.executed == 4 and outcome.errors == 4
    assert 60 <= elapsed < 61  # two 30 s attempts, in virtual time
    rows = list(store.query("select error_kind, attempt_count, status from results"
                            " order by error_kind desc"))
    # the probe's cell timed out twice; the cells waiting on the endpoint ended when it proved silent
    assert rows[0] == {"error_kind": "timeout", "attempt_count": 2, "status": "ERROR"}
    waited = {(r["error_kind"], r["status"]) for r in rows[1:]}
    assert waited <= {("endpoint_silent", "ERROR"), ("timeout", "ERROR")}


@pytest.mark.slow
async def test_concurrency_limits_hold_at_the_server(compose: Compose, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 60)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, MockSettings(latency_ms=20))
        base = [
            "service=mock",
            "service.mock.enabled=false",
            f"service.base_url={server.url}",
            "eval=g",
            f"registry={registry}",
        ]
        for run_limit, service_limit, expected in ((5, 64, 5), (64, 3, 3)):
            plan = build_plan(
                compose(
                    *base,
                    f"run.concurrency={run_limit}",
                    f"service.max_concurrency={service_limit}",
                    f"store.path={tmp_path / f'{run_limit}.db'}",
                )
            )
            server.stats.reset()
            await execute(plan, open_store(plan.store_path), total=count_cells(plan))
            assert server.stats.max_in_flight == expected
        nursery.cancel_scope.cancel()


@pytest.mark.slow
def test_multirun_sweep_writes_one_store_and_a_sweep_report(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalhydra",
            "-m",
            "service=mock,mock_slow",
            "eval=smoke",
            "trials=2",
            "run.progress=false",
            "service.mock.latency_ms=0",
            "hydra.sweep.dir=sweep",
            "report=[json,md,html]",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    conn = sqlite3.connect(tmp_path / "outputs" / "evalhydra.db")
    assert conn.execute("select count(*), count(distinct sweep_dir) from runs").fetchone() == (2, 1)
    assert conn.execute("select count(*) from results").fetchone() == (8,)
    report = (tmp_path / "sweep" / "report" / "baseline_comparisons.json").read_text()
    assert '"baseline_name": "mock"' in report and '"candidate_name": "mock_slow"' in report
    assert (tmp_path / "sweep" / "report" / "report.md").exists()
    page = (tmp_path / "sweep" / "report" / "report.html").read_text()  # the jobs asked for html
    assert "mock_slow" in page and "mock/" in page
    jobs = sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.name != "report" and p.is_dir())
    assert [re.fullmatch(r"(\d)-[0-9a-f]{8}", name) is not None for name in jobs] == [True, True], jobs
    assert [name[0] for name in jobs] == ["0", "1"]


def test_dataset_errors_stop_the_run_before_any_call(compose: Compose, tmp_path: Path) -> None:
    import pytest

    from evalhydra.core.errors import EvalHydraError

    registry = numbered_registry(tmp_path / "reg", 3)
    with (registry / "data/g/e/test.jsonl").open("a") as handle:
        handle.write('{"id": "bad"\n')
    plan = build_plan(compose(f"registry={registry}", "eval=g"))
    with pytest.raises(EvalHydraError, match=r"test\.jsonl:4: invalid JSON"):
        count_cells(plan)
    assert not plan.store_path.exists()


def test_a_dead_endpoint_watch_trips_only_before_any_answer() -> None:
    from evalhydra.execute.deadend import DeadEndpointWatch
    from evalhydra.store.rows import ResultRow

    def row(kind: str | None) -> ResultRow:
        return ResultRow(cell_key="k", run_id="r", group="g", eval_id="e", service_name="s", model="m",
                         run_index=1, case_id="c", kind="chat", status="ERROR" if kind else "PASS",
                         passed=kind is None, error_kind=kind,
                         failure_reason="ConnectError" if kind else None)

    watch = DeadEndpointWatch(3)
    assert not watch.saw(row("connect_error")) and not watch.saw(row("timeout"))
    assert watch.saw(row("connect_error")) and watch.reason == "ConnectError"
    alive = DeadEndpointWatch(2)
    assert not alive.saw(row(None))  # one answer: the endpoint lives, whatever follows
    assert not any(alive.saw(row("timeout")) for _ in range(5))
    assert not any(DeadEndpointWatch(0).saw(row("timeout")) for _ in range(5))  # run.fail_fast=false


async def test_an_interrupted_resumed_run_holds_every_stored_cell_it_met(
    compose: Compose, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    registry = numbered_registry(tmp_path / "reg", 8)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, MockSettings())
        base = [f"registry={registry}", "service=mock", "service.mock.enabled=false",
                f"service.base_url={server.url}", "eval=g", "service.timeout_ms=600000"]
        first = build_plan(compose(*base, "run.limit=6"))
        store = open_store(first.store_path)
        await execute(first, store, total=count_cells(first))
        server.settings = dataclasses.replace(server.settings, fault="hang")  # the other two never end

        async def stop() -> None:
            await trio.sleep(60)
            os.kill(os.getpid(), signal.SIGTERM)

        nursery.start_soon(stop)
        resumed = await execute(build_plan(compose(*base)), store, total=8)
        nursery.cancel_scope.cancel()
    assert resumed.interrupted and (resumed.skipped, resumed.executed) == (6, 0)
    held = store.conn.execute("select count(*) from run_cells where run_id = ?", [resumed.run_id]).fetchone()
    assert held == (6,)  # recorded as the producer stopped, though fewer than a batch
    store.close()
