"""Start-up of the default run against the floors under it, interleaved in one run.

Each side is a fresh ``python`` process, timed from spawn to exit (wall) and by
its own CPU (user + system, from ``wait4``); the sides run in turn, round after
round, so a noisy machine slows them all alike. The sides:

* ``python``: ``python -c pass``, the interpreter alone;
* ``hydra-min``: a minimal ``@hydra.main`` app with a one-key config (Hydra's own
  start-up: its imports, its two compositions, its run directory and logs);
* ``hydra-libs``: the same app, but its job also imports what evalhydra's design
  fixes (trio, httpx, sqlite-utils, tabulate), runs one ``trio.run`` and inserts
  a row with ``sqlite_utils`` (``bench/floors.py``): the floor of any Hydra +
  trio + httpx + SQLite app (httpx imported without its CLI module, as
  :mod:`evalhydra.cli.startup` does);
* ``evalhydra``: ``python -m evalhydra trials=5`` (the default eval, 10 cells
  against the built-in mock), a fresh store and run directory each round.

``evalhydra − hydra-libs`` is what evalhydra itself adds to start-up.
Target (issue 12): the default run for 10 cells ≤ 0.8 s wall, median of 5.

Usage::

    python bench/startup.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from floors import CACHING_ENV, TOUCH_LIBRARIES, hydra_app  # bench/floors.py, beside this script

SIDES = ("python", "hydra-min", "hydra-libs", "evalhydra")

def _write_apps(root: Path) -> dict[str, list[str]]:
    (root / "min.py").write_text(hydra_app("print(cfg.a)"))
    (root / "libs.py").write_text(hydra_app(TOUCH_LIBRARIES))
    py = sys.executable
    return {
        "python": [py, "-c", "pass"],
        "hydra-min": [py, str(root / "min.py"), "+a=1", f"hydra.run.dir={root / 'min-run'}"],
        "hydra-libs": [py, str(root / "libs.py"), "+a=1", f"hydra.run.dir={root / 'libs-run'}"],
        "evalhydra": [py, "-m", "evalhydra", "trials=5", f"store.path={root / 'eh.db'}",
                      f"hydra.run.dir={root / 'eh-run'}"],
    }


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one process (its output goes to a file: a pipe nobody reads
    until the process exits could fill and stall it)."""
    with tempfile.TemporaryFile() as log:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=CACHING_ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            log.seek(0)
            raise SystemExit(f"{' '.join(argv)} exited {code}:\n{log.read().decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def _clean(root: Path) -> None:
    for name in ("eh.db", "eh.db-wal", "eh.db-shm"):
        (root / name).unlink(missing_ok=True)


def main() -> None:
    """Time every side ``--rounds`` times, interleaved, and print medians and differences."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {side: [] for side in SIDES}
    cpus: dict[str, list[float]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        commands = _write_apps(root)
        for side in SIDES:  # one warm-up each: bytecode caches, the page cache
            _clean(root)
            _timed(commands[side], root)
        for _ in range(args.rounds):
            for side in SIDES:
                _clean(root)
                wall, cpu = _timed(commands[side], root)
                walls[side].append(wall)
                cpus[side].append(cpu)
    med = {side: statistics.median(walls[side]) for side in SIDES}
    print(f"start-up, median of {args.rounds} interleaved rounds ({os.cpu_count()} cores)")
    print(f"{'side':<12} {'wall s':>7} {'min':>6} {'max':>6} {'CPU s':>6}")
    for side in SIDES:
        print(f"{side:<12} {med[side]:7.3f} {min(walls[side]):6.3f} {max(walls[side]):6.3f} "
              f"{statistics.median(cpus[side]):6.3f}")
    print(f"evalhydra − hydra-libs = {med['evalhydra'] - med['hydra-libs']:.3f} s (evalhydra's own start-up)")
    print(f"evalhydra − hydra-min = {med['evalhydra'] - med['hydra-min']:.3f} s")
    verdict = "met" if med["evalhydra"] <= 0.8 else "not met"
    print(f"evalhydra default run {med['evalhydra']:.3f} s (target ≤ 0.8 s: {verdict})")


if __name__ == "__main__":
    main()
