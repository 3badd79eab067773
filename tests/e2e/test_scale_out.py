"""Scale-out on existing engines: shards of one eval, launchers that keep the config and the exit
code, and an exact, order-independent merge."""

from __future__ import annotations

import json
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from omegaconf import DictConfig

from evalhydra.core.errors import EvalHydraError
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import count_cells, planned_cells
from evalhydra.store.db import Batch, open_store
from evalhydra.store.merge import merge_stores
from evalhydra.store.views import latest_version_sql
from tests.helpers import (
    chat_requests,
    installed_script,
    mock_process,
    numbered_registry,
    result_row,
    run_cli,
    stored_results,
)
from tests.viewer.test_viewer import start_viewer, stop

Compose = Callable[..., DictConfig]


def test_shards_are_disjoint_and_cover_the_plan(compose: Compose, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 50)
    whole = {
        job.key for job in planned_cells(build_plan(compose(f"registry={registry}", "eval=g", "trials=3")))
    }
    parts = []
    for index in range(4):
        plan = build_plan(
            compose(
                f"registry={registry}", "eval=g", "trials=3", f"run.shard_index={index}", "run.shard_count=4"
            )
        )
        keys = [job.key for job in planned_cells(plan)]
        assert count_cells(plan) == len(keys) > 0
        parts.append(set(keys))
    assert set().union(*parts) == whole and sum(map(len, parts)) == len(whole) == 150
    again = build_plan(
        compose(f"registry={registry}", "eval=g", "trials=3", "run.shard_index=2", "run.shard_count=4")
    )
    assert {job.key for job in planned_cells(again)} == parts[2]  # stable across runs and machines


@pytest.mark.parametrize("index,count", [(4, 4), (-1, 2), (0, 0)])
def test_a_shard_out_of_range_is_refused(compose: Compose, index: int, count: int) -> None:
    with pytest.raises(EvalHydraError, match="run.shard_index"):
        build_plan(compose(f"run.shard_index={index}", f"run.shard_count={count}"))


def _row(key: str, run: str, at: str, error: str | None = None) -> dict[str, Any]:
    return result_row(key, run, error=error, at=at, output=f"{run}@{at}")


def _shard(path: Path, run: str, rows: list[dict[str, Any]]) -> Path:
    store = open_store(path)
    store.start_run({"run_id": run, "status": "completed", "started_at": "2026-01-01T00:00:00.000Z"})
    store.write(Batch(results=rows, members=[(run, r["cell_key"]) for r in rows]))
    store.close()
    return path


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_merge_is_order_independent_and_keeps_every_runs_version(
    tmp_path: Path, order: tuple[int, int]
) -> None:
    shards = [
        _shard(
            tmp_path / "a.db",
            "run-a",
            [
                _row("k1", "run-a", "2026-01-01T00:00:09.000Z", error="timeout"),
                _row("k2", "run-a", "2026-01-01T00:00:01.000Z"),
            ],
        ),
        _shard(
            tmp_path / "b.db",
            "run-b",
            [
                _row("k1", "run-b", "2026-01-01T00:00:01.000Z"),
                _row("k2", "run-b", "2026-01-01T00:00:05.000Z"),
            ],
        ),
    ]
    target = tmp_path / "all.db"
    assert merge_stores(target, [shards[i] for i in order]) == 4  # each run's version of each cell
    assert merge_stores(target, [shards[i] for i in order]) == 4  # idempotent
    conn = sqlite3.connect(target)
    versions = set(conn.execute("select cell_key, run_id, output from results").fetchall())
    links = set(conn.execute("select run_id, cell_key, result_run_id from run_cells").fetchall())
    newest = dict(conn.execute(f"select cell_key, output from results where {latest_version_sql()}"))
    conn.close()
    assert versions == {("k1", "run-a", "run-a@2026-01-01T00:00:09.000Z"),
                        ("k2", "run-a", "run-a@2026-01-01T00:00:01.000Z"),
                        ("k1", "run-b", "run-b@2026-01-01T00:00:01.000Z"),
                        ("k2", "run-b", "run-b@2026-01-01T00:00:05.000Z")}
    assert links == {(run, key, run) for run in ("run-a", "run-b") for key in ("k1", "k2")}  # each its own
    # a cell's current verdict is its newest version, whichever shard came first
    assert newest == {"k1": "run-a@2026-01-01T00:00:09.000Z", "k2": "run-b@2026-01-01T00:00:05.000Z"}


def test_a_closed_store_is_self_contained(tmp_path: Path) -> None:
    path = _shard(tmp_path / "s.db", "run-a", [_row(f"k{i}", "run-a", "t") for i in range(500)])
    shutil.copy(path, tmp_path / "copy.db")  # the file alone, as a job's shard copied after it ended
    assert stored_results(tmp_path / "copy.db") == 500


def _without_latency(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _without_latency(v) for k, v in doc.items() if k != "latency"}
    if isinstance(doc, list):
        return [_without_latency(v) for v in doc]
    return doc


@pytest.mark.slow
def test_eight_shards_merged_equal_one_process(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 40)
    common = (f"registry={registry}", "eval=g", "trials=2", "run.progress=false")
    single = run_cli(*common, f"store.path={tmp_path / 'single.db'}", "hydra.run.dir=single", cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    res = run_cli(
        "-m",
        *common,
        "run.shard_index=0,1,2,3,4,5,6,7",
        "run.shard_count=8",
        "store.path=shards/${run.shard_index}.db",
        "hydra.sweep.dir=sweep",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert merge_stores(tmp_path / "all.db", sorted((tmp_path / "shards").glob("*.db"))) == 80
    report = run_cli(
        "report",
        "--store",
        str(tmp_path / "all.db"),
        "--out",
        "merged",
        *[r for r in _run_ids(tmp_path / "all.db")],
        cwd=tmp_path,
    )
    assert report.returncode == 0, report.stderr
    merged = json.loads((tmp_path / "merged" / "evals.json").read_text())
    one = json.loads((tmp_path / "single" / "evals.json").read_text())
    assert _without_latency(merged) == _without_latency(one)


def _run_ids(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    ids = [r[0] for r in conn.execute("select run_id from runs order by started_at")]
    conn.close()
    return ids


#: Each launcher: the plugin it needs, and the overrides that size it for this machine.
LAUNCHERS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", ["hydra.launcher.n_jobs=2"]),
    "ray": (
        "hydra_plugins.hydra_ray_launcher",
        ["+hydra.launcher.ray.init.num_cpus=2", "+hydra.launcher.ray.init.include_dashboard=false"],
    ),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", []),
}


@pytest.mark.slow
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_a_custom_registry_eval_split_over_a_launcher_sends_each_cell_once(
    launcher: str, tmp_path: Path
) -> None:
    plugin, extra = LAUNCHERS[launcher]
    pytest.importorskip(plugin)
    numbered_registry(tmp_path / "reg", 30, eval_id="hidden.e")  # passed as the relative registry=reg
    db = tmp_path / "s.db"
    with mock_process("--latency-ms", "20") as url:
        args = (
            "-m",
            f"hydra/launcher={launcher}",
            *extra,
            "registry=reg",
            "eval=hidden",
            "trials=2",
            "service=mock",
            "service.mock.enabled=false",
            f"service.base_url={url}",
            "run.shard_index=0,1",
            "run.shard_count=2",
            "run.progress=false",
            f"store.path={db}",
            "hydra.sweep.dir=sweep",
        )
        res = run_cli(*args, cwd=tmp_path, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        assert chat_requests(url) == 60 and stored_results(db) == 60  # every cell sent once, stored once
        assert "sweep report (2 jobs)" in res.stdout
        job_logs = "".join(p.read_text() for p in (tmp_path / "sweep").rglob("*_log.out"))  # submitit's
        logs = res.stdout + job_logs
        assert "· shard 1/2" in logs and "· shard 2/2" in logs  # each job's summary names its shard
        again = run_cli(*args, cwd=tmp_path, timeout=300)
        assert again.returncode == 0 and chat_requests(url) == 60  # a rerun sends nothing
    failing = run_cli(
        "-m",
        f"hydra/launcher={launcher}",
        *extra,
        "registry=reg",
        "eval=hidden",
        "service.model=m1,m2",
        "service.mock.fail_rate=1",
        "run.progress=false",
        f"store.path={tmp_path / 'f.db'}",
        "hydra.sweep.dir=sweep2",
        cwd=tmp_path,
        timeout=300,
    )
    assert failing.returncode == 3, failing.stdout + failing.stderr  # the worst job's code, not 0


@pytest.mark.slow
def test_a_ray_cluster_on_loopback_runs_a_custom_registry_sweep(tmp_path: Path) -> None:
    ray = installed_script("ray") or pytest.fail("ray is a test extra: pip install -e '.[test]'")
    numbered_registry(tmp_path / "reg", 5, eval_id="hidden.e")
    port = str(_free_port())
    elsewhere = tmp_path / "cluster"  # the cluster's working directory is not the driver's
    elsewhere.mkdir()
    started = subprocess.run(
        [
            ray,
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=elsewhere,
    )
    assert started.returncode == 0, started.stderr
    try:
        res = run_cli(
            "-m",
            "hydra/launcher=ray",
            "+hydra.launcher.ray.init.address=auto",  # the cluster just started (with its token)
            "+hydra.launcher.ray.init.object_store_memory=null",
            "registry=reg",
            "eval=hidden",
            "service.model=m1,m2",
            "run.progress=false",
            f"store.path={tmp_path / 's.db'}",
            "hydra.sweep.dir=sweep",
            cwd=tmp_path,
            timeout=300,
        )
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "sweep report (2 jobs)" in res.stdout and stored_results(tmp_path / "s.db") == 10
    jobs = sorted(p.parent.name for p in (tmp_path / "sweep").glob("*/.hydra"))
    assert len(jobs) == 2 and (tmp_path / "sweep" / "report" / "report.md").is_file()
    assert not list(elsewhere.rglob(".hydra"))  # nothing landed under the cluster's directory
    db = sqlite3.connect(tmp_path / "s.db")
    assert sorted(n for (n,) in db.execute("select job_num from runs")) == [0, 1]
    db.close()


@pytest.mark.slow
def test_a_sweep_compares_with_the_first_value_written_or_the_baseline_given(tmp_path: Path) -> None:
    def baselines(*extra: str) -> set[str]:
        res = run_cli("-m", "service=mock_slow,mock", "eval=smoke", "run.progress=false",
                      f"store.path={tmp_path / 's.db'}", *extra, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        report = sorted(tmp_path.glob("outputs/multirun/*/*/report/baseline_comparisons.json"))[-1]
        doc = json.loads(report.read_text())["baseline_comparisons"]
        return {c["baseline_name"] for c in doc if c["target_kind"] == "service"}

    assert baselines() == {"mock_slow"}  # as written, not alphabetical
    assert baselines("baseline=mock") == {"mock"}


@pytest.mark.slow
def test_every_reader_of_a_sweep_takes_the_first_value_swept_as_its_baseline(tmp_path: Path) -> None:
    """The end-of-sweep table (with Δ and a verdict), the sweep report, ``report --sweep`` (byte for
    byte), ``view --static --sweep`` and the viewer's sweep page all compare with ``mock_slow``,
    though ``mock`` sorts first."""
    store = tmp_path / "s.db"
    res = run_cli("-m", "service=mock_slow,mock", "eval=smoke", "trials=2", "run.progress=false",
                  f"store.path={store}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    table = res.stdout[res.stdout.rindex("eval "):]
    header = table.splitlines()[0].split()
    assert header == ["eval", "mock_slow:mock-model-slow", "mock:mock-model"], table  # the order swept
    assert "Δ +0.0 pts" in table
    assert "verdict: cannot tell against mock_slow: cannot reach p < 0.05 with 2 cases" in table
    (sweep,) = {p.parent.parent for p in tmp_path.glob("outputs/multirun/*/*/report/report.md")}
    again = tmp_path / "again"
    done = run_cli("report", "--sweep", str(sweep), "--store", str(store), "--out", str(again), "--format",
                   "json,md,text", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = {p.name for p in again.iterdir()}
    assert {"baseline_comparisons.json", "report.md", "report.txt"} <= written
    for name in written:
        assert (again / name).read_bytes() == (sweep / "report" / name).read_bytes(), name
    rows = json.loads((again / "baseline_comparisons.json").read_text())["baseline_comparisons"]
    assert {r["baseline_name"] for r in rows} == {"mock_slow"}
    static = run_cli("view", "--static", "--sweep", str(sweep), "--store", str(store), "--out",
                     str(tmp_path / "st"), cwd=tmp_path)
    assert static.returncode == 0, static.stderr
    html = (tmp_path / "st" / "report.html").read_text()
    assert "<td>smoke.reply_ok</td><td>mock_slow</td><td>mock</td>" in html
    proc, url = start_viewer(store, "--sweep", str(sweep))
    try:
        path, token = url.split("?")
        with httpx.Client(base_url=path.split("/runs/")[0], follow_redirects=True) as client:
            client.get(f"/?{token}")
            page = client.get(path[len(path.split("/runs/")[0]):]).text
    finally:
        stop(proc)
    assert "<td>smoke.reply_ok</td><td>mock_slow</td><td>mock</td>" in page


@pytest.mark.slow
def test_one_store_per_job_says_how_to_report_on_all(tmp_path: Path) -> None:
    res = run_cli("-m", "store.path=job_${hydra:job.num}.db", "trials=1,2", "run.progress=false",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "each job wrote its own store; this report covers job 0's (job_0.db)" in res.stdout
    assert "evalhydra merge --store" in res.stdout and "job_0.db job_1.db" in res.stdout
    assert "Traceback" not in res.stderr and "InterpolationResolutionError" not in res.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_shard_bench_prints_both_walls_and_both_floors() -> None:
    """bench/shard_agents.py at a tiny size: every wall and ratio it reports, all trials stored."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    bench = Path(__file__).resolve().parents[2] / "bench" / "shard_agents.py"
    res = subprocess.run([sys.executable, str(bench), "--trials", "4", "--sleep", "0.1", "--shards", "2"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"^single job +wall= *\d+\.\d\d s  passed=4$", res.stdout, re.M), res.stdout
    assert re.search(r"^2 shards on joblib +wall= *\d+\.\d\d s  passed=4$", res.stdout, re.M), res.stdout
    floor = r"^hydra floor +wall= *\d+\.\d\d s  \(a minimal Hydra app, 2 joblib jobs sleeping 0\.2 s"
    assert re.search(floor, res.stdout, re.M), res.stdout
    assert re.search(r"^hydra \+ libs floor +wall= *\d+\.\d\d s", res.stdout, re.M), res.stdout
    ratios = r"^sharded / single = \d\.\d{3} .* hydra \+ libs floor / single = \d\.\d{3}$"
    assert re.search(ratios, res.stdout, re.M), res.stdout
