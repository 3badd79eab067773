"""``evalhydra view`` over 1,000,000 stored results: how long each page takes to answer.

Fills a store with :mod:`report_scale`'s synthetic run (10 evals × 20,000
cases × 5 trials, ~27 % failing, 2 % errors), saves its summary as a finished
run does (timed: what the end of a run pays for it), starts ``evalhydra view``
in its own process and times, over HTTP on loopback, the median of several
GETs of each page: the run list, the run (summary, chart and the grid's first
page), a later grid page, the grid filtered and searched, one case, and the
live status. The target (issue 36): the run list and the run's page under 2 s.

Floors measured in the same run: one GET of a page the server answers without
the store (a 404, the server's own cost), and one pass of SQLite over the run's
results returning a row per result (``report_scale``'s floor): a page that
took that long would have read the run whole.

Usage::

    python bench/viewer_scale.py [--rows 1000000] [--repeat 5] [--keep DIR]
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
#: The pages timed, by name.
PAGES = {
    "run list": "/",
    "run page (summary + grid page 1)": f"/runs/{RUN_ID}",
    "grid page 1000": f"/runs/{RUN_ID}?page=1000",
    "grid: failures": f"/runs/{RUN_ID}?filter=failures",
    "grid: flaky": f"/runs/{RUN_ID}?filter=flaky",
    "grid: search": f"/runs/{RUN_ID}?q=case-01234",
    "case page": f"/runs/{RUN_ID}/case?" + urlencode({"eval": "bench.e3", "case": "case-01234"}),
    "live status": f"/api/runs/{RUN_ID}",
    "floor: 404 (no store)": "/nothing-here",
}
TARGETS = {"run list": 2.0, "run page (summary + grid page 1)": 2.0}


def save_summary(db: Path) -> float:
    """Save the run's summary as :func:`evalhydra.job.run.finish_job` does; seconds taken."""
    from evalhydra.reports.runsummary import run_summary
    from evalhydra.store.db import open_store

    store = open_store(db)
    started = time.perf_counter()
    store.save_run_summary(RUN_ID, run_summary(store.conn, [RUN_ID]))
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def time_pages(db: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Start the viewer on ``db`` and time each page ``repeat`` times (after one warm-up GET)."""
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
            for name, path in PAGES.items():
                client.get(path)
                seconds = []
                for _ in range(repeat):
                    began = time.perf_counter()
                    response = client.get(path)
                    seconds.append(time.perf_counter() - began)
                    assert response.status_code in (200, 404), (path, response.status_code)
                out[name] = {"median_s": statistics.median(seconds), "max_s": max(seconds)}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    return out


def main(argv: list[str] | None = None) -> int:
    """Fill, save the summary, time the pages; print the figures as JSON.

    Returns:
        0 if the run list and the run's page each answered under 2 s (median), else 1.
    """
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", metavar="DIR", help="keep the store in DIR")
    args = parser.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="evalhydra-view-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "store.db"
    if not db.exists():
        report_scale.fill(db, args.rows)
    summary_s = save_summary(db)
    floor = report_scale.scan_floor(db)
    pages = time_pages(db, args.repeat)
    met = all(pages[name]["median_s"] < limit for name, limit in TARGETS.items())
    print(json.dumps({"rows": args.rows, "summary_saved_at_finish_s": round(summary_s, 3),
                      "floor_one_pass_over_the_run_s": round(float(floor["seconds"]), 3),  # type: ignore[arg-type]
                      "pages": {k: {m: round(v, 3) for m, v in p.items()} for k, p in pages.items()},
                      "targets_met": met}, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
