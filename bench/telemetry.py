"""What exporting every cell as OpenTelemetry spans costs a run: the same run with and without
``telemetry.export=file``, interleaved, against the built-in mock in its own process.

Each round runs ``python -m evalhydra`` on a fresh store twice, once per side, in an order that
alternates between rounds; the figure is the median over rounds of each side's wall time, and the
ratio of the medians. Target (issue 64): the file export costs at most 5 % of the wall time at
10,000 cells.

Usage::

    python bench/telemetry.py                      # 2,000 cases × 5 trials, 3 rounds
    python bench/telemetry.py --cases 400 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers import mock_process, numbered_registry  # noqa: E402

SIDES = {"off": [], "file": ["telemetry.export=file"]}


def run_once(argv: list[str], work: Path) -> float:
    """One run's wall time, from spawn to exit."""
    began = time.perf_counter()
    subprocess.run(argv, cwd=work, check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> int:
    """Run the bench and print its figures as JSON; exit 0 when the target held."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--c", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="evalhydra-telemetry-"))
    registry = numbered_registry(work / "registry", args.cases, eval_id="bench.telemetry")
    walls: dict[str, list[float]] = {side: [] for side in SIDES}
    with mock_process("--latency-ms", str(args.latency_ms)) as url:
        for round_ in range(args.rounds):
            order = list(SIDES) if round_ % 2 == 0 else list(reversed(SIDES))
            for side in order:
                store = work / f"{side}-{round_}.db"
                argv = [sys.executable, "-m", "evalhydra", f"registry={registry}", "eval=bench.telemetry",
                        f"trials={args.trials}", "service=mock", "service.mock.enabled=false",
                        f"service.base_url={url}", f"store.path={store}", f"run.concurrency={args.c}",
                        f"service.max_concurrency={args.c}", "run.progress=false",
                        f"hydra.run.dir={work / f'out-{side}-{round_}'}", *SIDES[side]]
                walls[side].append(run_once(argv, work))
    medians = {side: statistics.median(w) for side, w in walls.items()}
    ratio = medians["file"] / medians["off"]
    spans = sum(1 for _ in (work / f"out-file-{args.rounds - 1}" / "telemetry.jsonl").open())
    print(json.dumps({"cells": args.cases * args.trials, "rounds": args.rounds,
                      "wall_s": {k: [round(x, 4) for x in v] for k, v in walls.items()},
                      "median_s": {k: round(v, 4) for k, v in medians.items()},
                      "ratio": round(ratio, 3), "export_lines": spans}))
    return 0 if ratio <= 1.05 else 1


if __name__ == "__main__":
    sys.exit(main())
