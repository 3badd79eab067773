"""A million cells end to end, killed at half and resumed: the run as a user runs it, at scale.

A registry eval of ``--cases`` exact_match cases (one JSONL line each, a file larger than any
in the suite) runs ``--trials`` times each through ``python -m evalhydra`` against the built-in
mock in its own process (latency ``--latency-ms``), at concurrency ``--c``. At ``--kill-at`` of
the cells stored, the run is killed with SIGKILL; the same command then runs again. Measured:

* each phase's wall from spawn to exit (plan, run, store, the summary with every interval, the
  reports the run writes) and its peak RSS (``wait4``);
* that the rerun sent exactly the cells the first phase had not stored (the mock's count of chat
  requests after a reset), and that the store then holds every cell once;
* ``evalhydra report`` of the finished run (json, md, text), in its own process;
* the viewer's run page over that store (first GET and the median of three more).

The wire's pace is the floor: ``cells × latency ÷ concurrency``. Targets (issue 62): end to end
(both phases) ≤ 5 minutes for 1,000,000 cells, peak RSS < 200 MB, the rerun exact, ``report``
< 5 s, the run page < 1 s.

Usage::

    python bench/million.py                                  # 200,000 cases × 5 trials
    python bench/million.py --cases 20000 --trials 5         # a quick look (100,000 cells)
    python bench/million.py --kill-at 0                      # one uninterrupted run
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from viewer_scale import time_pages  # noqa: E402  (the viewer bench's page timer)

from tests.helpers import mock_process, numbered_registry  # noqa: E402

EVAL_ID = "bench.million"
DATASET = "data/g/e/test.jsonl"  # numbered_registry's


def _mock(url: str, what: str, post: bool = False) -> dict[str, Any]:
    request = urllib.request.Request(f"{url}/_mock/{what}", data=b"{}" if post else None,
                                     method="POST" if post else "GET",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return dict(json.load(reply))


def _stored(db: Path) -> int:
    """Results stored so far (read-only; the run writes in WAL mode)."""
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute("select count(*) from results").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


def run_phase(argv: list[str], cwd: Path, db: Path, kill_at: int | None) -> dict[str, Any]:
    """Run ``argv`` to its end, or SIGKILL it once ``kill_at`` results are stored."""
    log = (cwd / f"phase-{time.monotonic_ns()}.log").open("w")
    began = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    killed = False
    while True:  # wait4 (not poll, which would reap the process and lose its rusage)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if kill_at is not None and not killed else 0)
        if pid:
            break
        time.sleep(0.5)
        if kill_at is not None and not killed and _stored(db) >= kill_at:
            os.kill(proc.pid, signal.SIGKILL)  # not send_signal, whose poll could reap it first
            killed = True
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    log.close()
    return {"wall_s": round(time.perf_counter() - began, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "killed": proc.returncode == -signal.SIGKILL,
            "exit": proc.returncode, "stored_after": _stored(db)}


def time_report(db: Path, run_id: str, out: Path) -> float:
    """``evalhydra report RUN --format json,md,text`` in its own process, wall seconds."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evalhydra", "report", run_id, "--store", str(db),
                    "--format", "json,md,text", "--out", str(out)], check=True, capture_output=True)
    return round(time.perf_counter() - began, 2)


def time_run_page(db: Path, run_id: str, repeat: int = 3) -> dict[str, float]:
    """The viewer's run page over ``db``: its first GET and the median of ``repeat`` more."""
    timed = time_pages(db, repeat, {"run": f"/runs/{run_id}"})["run"]
    return {"first_s": round(timed["first_s"], 3), "median_s": round(timed["median_s"], 3)}


def main() -> int:
    """Run the bench and print its figures as JSON lines; exit 0 if every target held."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200_000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--c", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--kill-at", type=float, default=0.5,
                        help="share of cells stored at the kill (0: none)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="evalhydra-million-"))
    work.mkdir(parents=True, exist_ok=True)
    cells = args.cases * args.trials
    began = time.perf_counter()
    registry = numbered_registry(work / "registry", args.cases, eval_id=EVAL_ID)
    size_mb = (registry / DATASET).stat().st_size / 2**20
    print(json.dumps({"cells": cells, "cases": args.cases, "dataset_mb": round(size_mb, 1),
                      "written_s": round(time.perf_counter() - began, 1)}), flush=True)
    db = work / "million.db"
    with mock_process("--latency-ms", str(args.latency_ms)) as url:
        argv = [sys.executable, "-m", "evalhydra", f"registry={registry}", f"eval={EVAL_ID}",
                f"trials={args.trials}", "service=mock", "service.mock.enabled=false",
                f"service.base_url={url}", f"store.path={db}", f"run.concurrency={args.c}",
                f"service.max_concurrency={args.c}", "run.progress=false", f"hydra.run.dir={work / 'out'}"]
        phases = []
        kill_at = int(cells * args.kill_at) if args.kill_at > 0 else None
        if kill_at is not None:
            phases.append(run_phase(argv, work, db, kill_at))
            print(json.dumps({"phase": "killed", **phases[-1]}), flush=True)
        before = _stored(db)
        _mock(url, "reset", post=True)
        phases.append(run_phase(argv, work, db, None))
        sent = int(_mock(url, "stats")["chat_requests"])
        print(json.dumps({"phase": "rerun" if kill_at else "run", **phases[-1], "sent": sent,
                          "unstored_before": cells - before}), flush=True)
    conn = sqlite3.connect(db)
    run_id, status = conn.execute("select run_id, status from runs order by started_at desc").fetchone()
    distinct = conn.execute("select count(distinct cell_key) from results").fetchone()[0]
    conn.close()
    report_s = time_report(db, run_id, work / "report")
    page = time_run_page(db, run_id)
    wall = sum(p["wall_s"] for p in phases)
    floor = cells * args.latency_ms / 1000 / args.c
    figures = {"end_to_end_s": round(wall, 1), "wire_floor_s": round(floor, 1),
               "ratio_to_wire": round(wall / floor, 2) if floor else None,
               "peak_rss_mb": max(p["peak_rss_mb"] for p in phases),
               "rerun_exact": sent == cells - before, "stored": phases[-1]["stored_after"],
               "distinct_cells": distinct, "status": status, "report_s": report_s, "run_page": page}
    print(json.dumps(figures), flush=True)
    met = (wall <= 300 and figures["peak_rss_mb"] < 200 and figures["rerun_exact"]
           and distinct == cells and report_s < 5 and page["median_s"] < 1)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
