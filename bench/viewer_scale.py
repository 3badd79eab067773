"""``evalhydra view`` over 1,000,000 stored results: how long each page takes to answer.

Fills a store with two of :mod:`report_scale`'s synthetic runs of the same
cells (10 evals × 20,000 cases × 5 trials, ~27 % failing, 2 % errors; the
second's verdicts shifted), saves their summaries and per-case fractions as a
finished run does (timed: what the end of a run pays for them), starts
``evalhydra view`` in its own process and times, over HTTP on loopback, the
median of several GETs of each page: the run list, the run (summary, chart and
the grid's first page), a deep and the last grid page, the grid filtered and
searched, one case, the live status, and the two runs compared. Then the
second run is marked running and a new viewer times the run list, its page and
its status while it runs: the first GET (which reads the run once) and the
median of the later ones (which read only what was stored since).

With ``--labels N`` (and ``--judged 10``: every result judge-scored), N judged outputs are
then labelled and the run page is timed again: it adds the "Judges" section, each judge's
agreement and the corrected pass rates, and the two runs are compared judge-corrected (issue 52).

Targets (issues 36 and 50): the run list and a run's page under 2 s (labelled too); two 1M-result
runs compared under 5 s; the last grid page within 2 × the first; a running
1M-result run's list under 1 s and page under 2 s.

Floors measured in the same run: one GET of a page the server answers without
the store (a 404, the server's own cost), and one pass of SQLite over the run's
results returning a row per result (``report_scale``'s floor): a page that
took that long would have read the run whole.

Usage::

    python bench/viewer_scale.py [--rows 1000000] [--repeat 5] [--keep DIR] [--judged 2] [--labels 0]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report_scale  # noqa: E402  (the bench's own store filler)

RUN_ID = report_scale.RUN_ID
#: The second run: the same cells, other verdicts.
SECOND = "eval-bench-4567cdef"
#: The pages timed, by name.
PAGES = {
    "run list": "/",
    "run page (summary + grid page 1)": f"/runs/{RUN_ID}",
    "grid page 1000 (by offset, an old link)": f"/runs/{RUN_ID}?page=1000",
    "grid: last page (by key)": f"/runs/{RUN_ID}?last=1",
    "grid: failures": f"/runs/{RUN_ID}?filter=failures",
    "grid: flaky": f"/runs/{RUN_ID}?filter=flaky",
    "grid: search": f"/runs/{RUN_ID}?q=case-01234",
    "case page": f"/runs/{RUN_ID}/case?" + urlencode({"eval": "bench.e3", "case": "case-01234"}),
    "live status": f"/api/runs/{RUN_ID}",
    "compare two 1M-result runs": f"/compare?base={RUN_ID}&candidate={SECOND}",
    "floor: 404 (no store)": "/nothing-here",
}
#: The pages timed while the second run is running.
RUNNING_PAGES = {
    "running: run list": "/",
    "running: run page": f"/runs/{SECOND}",
    "running: live status": f"/api/runs/{SECOND}",
}
#: The pages timed once the store holds labels (``--labels``).
LABELLED_PAGES = {"labelled: run page (+ Judges section)": f"/runs/{RUN_ID}",
                  "labelled: compare, judge-corrected": f"/compare?base={RUN_ID}&candidate={SECOND}"
                                                        "&judge_corrected=1"}
TARGETS = {"run list": 2.0, "run page (summary + grid page 1)": 2.0, "compare two 1M-result runs": 5.0,
           "running: run list": 1.0, "running: run page": 2.0,
           "labelled: run page (+ Judges section)": 2.0, "labelled: compare, judge-corrected": 5.0}


def save_summary(db: Path, run_id: str) -> float:
    """Save a run's summary and per-case fractions as :func:`evalhydra.job.run.finish_job` does;
    seconds taken."""
    from evalhydra.analysis.runsummary import run_summary
    from evalhydra.store.db import open_store

    store = open_store(db)
    started = time.perf_counter()
    store.save_run_summary(run_id, run_summary(store.conn, [run_id]))
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def mark_running(db: Path) -> None:
    """The second run as a running one (no process recorded: never shown as gone)."""
    import sqlite3

    conn = sqlite3.connect(db)
    conn.execute("update runs set status = 'running', finished_at = null, hostname = null, pid = null"
                 " where run_id = ?", [SECOND])
    conn.commit()
    conn.close()


def time_pages(db: Path, repeat: int, pages: dict[str, str]) -> dict[str, dict[str, float]]:
    """Start the viewer on ``db`` and time each page: the first GET, then ``repeat`` more."""
    proc = subprocess.Popen([sys.executable, "-m", "evalhydra", "view", "--store", str(db), "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CI": "true"})
    assert proc.stdout is not None
    url = proc.stdout.readline().split(": ", 1)[1].strip()
    base = url.split("/?", 1)[0]
    out: dict[str, dict[str, float]] = {}
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            client.get(url)  # the token, then the cookie
            for name, path in pages.items():
                began = time.perf_counter()
                client.get(path)
                first = time.perf_counter() - began
                seconds = []
                for _ in range(repeat):
                    began = time.perf_counter()
                    response = client.get(path)
                    seconds.append(time.perf_counter() - began)
                    assert response.status_code in (200, 404), (path, response.status_code)
                out[name] = {"first_s": first, "median_s": statistics.median(seconds), "max_s": max(seconds)}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    return out


def main(argv: list[str] | None = None) -> int:
    """Fill, save the summary, time the pages; print the figures as JSON.

    Returns:
        0 if every target was met (medians), else 1.
    """
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", metavar="DIR", help="keep the store in DIR")
    parser.add_argument("--judged", type=int, default=report_scale.JUDGED,
                        help="evals (of 10) a judge scored")
    parser.add_argument("--labels", type=int, default=0, help="then label this many judged outputs")
    args = parser.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="evalhydra-view-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "store.db"
    if not db.exists():
        report_scale.fill(db, args.rows, judged=args.judged)
        report_scale.fill(db, args.rows, SECOND, salt=7, judged=args.judged,
                          started_at="2026-01-02T00:00:00.000Z")
    summary_s = save_summary(db, RUN_ID)
    save_summary(db, SECOND)
    floor = report_scale.scan_floor(db)
    pages = time_pages(db, args.repeat, PAGES)
    if args.labels:
        report_scale.label(db, args.labels)
        pages |= time_pages(db, args.repeat, LABELLED_PAGES)
    mark_running(db)
    pages |= time_pages(db, args.repeat, RUNNING_PAGES)
    met = {name: pages[name]["median_s"] < limit for name, limit in TARGETS.items() if name in pages}
    last, first = (pages[name]["median_s"] for name in ("grid: last page (by key)",
                                                         "run page (summary + grid page 1)"))
    met["last grid page within 2x the first"] = last <= 2 * first
    print(json.dumps({"rows_per_run": args.rows, "judged_evals": args.judged, "labels": args.labels,
                      "summary_and_fractions_saved_at_finish_s": round(summary_s, 3),
                      "floor_one_pass_over_the_run_s": round(float(floor["seconds"]), 3),  # type: ignore[arg-type]
                      "pages": {k: {m: round(v, 3) for m, v in p.items()} for k, p in pages.items()},
                      "targets_met": met}, indent=2))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
