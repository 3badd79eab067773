"""report.html at scale: size, time to write, and time to the first screen in Chromium.

Fills a store with synthetic results (``bench/report_scale.py``'s generator:
10 evals, one service and model, 5 trials per case; ~27 % fail, 2 % errors),
writes ``report.html`` for the run in a fresh process, then loads it in headless
Chromium and reads the time the page's script took to draw its first screen
(``performance.now()`` after the grid's first rows are in the DOM).

Usage::

    python bench/html_scale.py [--rows 100000] [--chromium /usr/bin/chromium] [--keep DIR]

Targets (issue 15): under 40 MB, written in under 10 s, first screen in under 3 s.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report_scale  # noqa: E402  (the store generator beside this script)


def write_page(db: Path, out: Path) -> float:
    """Seconds to write report.html (in a fresh process, so imports count as for a user)."""
    code = ("import sys, time; from pathlib import Path; from evalhydra.store.db import open_store; "
            "from evalhydra.reports.writer import write_run_reports; t = time.perf_counter(); "
            "s = open_store(sys.argv[1], read_only=True); "
            "write_run_reports(s, [sys.argv[3]], Path(sys.argv[2]), formats=['html'], "
            "cumulative=False); "
            "print(time.perf_counter() - t)")
    res = subprocess.run([sys.executable, "-c", code, str(db), str(out), report_scale.RUN_ID],
                         capture_output=True, text=True, check=True)
    return float(res.stdout.strip().splitlines()[-1])


def first_screen_ms(chromium: str, page: Path) -> tuple[int, float]:
    """(ms the page's script took to its first screen, wall seconds of the whole headless load)."""
    started = time.perf_counter()
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
            "--dump-dom", page.resolve().as_uri()]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - started
    match = re.search(r'data-first-screen-ms="(\d+)"', res.stdout)
    if not match:
        raise SystemExit(f"the page did not draw its first screen: {res.stderr[-500:]}")
    return int(match.group(1)), wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--keep", type=Path, help="keep the store and page in this directory")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="evalhydra-html-"))
    root.mkdir(parents=True, exist_ok=True)
    db = root / "store.db"
    if not db.exists():
        report_scale.fill(db, args.rows)
    seconds = write_page(db, root / "page")
    page = root / "page" / "report.html"
    size_mb = page.stat().st_size / 1e6
    script_ms, wall = first_screen_ms(args.chromium, page)
    print(f"rows={args.rows} size={size_mb:.1f} MB (target < 40) write={seconds:.2f} s (target < 10) "
          f"first_screen={script_ms / 1000:.2f} s (target < 3; headless load wall {wall:.2f} s)")
    if not args.keep:
        shutil.rmtree(root)
    return 0 if size_mb < 40 and seconds < 10 and script_ms < 3000 else 1


if __name__ == "__main__":
    raise SystemExit(main())
