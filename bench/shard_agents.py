"""Sharding a slow agent eval over joblib: four shards against one job, in one run.

An agent-CLI eval of one case whose trials each sleep 1 s (the shipped fake agent,
``SLEEP 1``), 16 trials, ``run.concurrency=1``: first as one job, then as four
shards (``run.shard_index=0,1,2,3 run.shard_count=4``) on Hydra's joblib launcher
with ``n_jobs=4``. Both walls include process start-up, as a user would time them.

Usage::

    python bench/shard_agents.py [--trials 16] [--sleep 1] [--shards 4]

Target (issue 13): the four shards take at most 0.4 × the single job's wall.
Needs ``pip install "evalhydra[joblib]"``.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VALIDATOR = """
from evalhydra.agents import ValidationResult

class Done:
    def validate(self, output_dir, log_content, trace=None):
        ok = (output_dir / "done.txt").exists()
        return ValidationResult("PASS" if ok else "FAIL", 1.0 if ok else 0.0)

validator = Done()
"""


def _registry(root: Path, sleep_s: float) -> Path:
    case = root / "reg" / "agent_cases" / "slow"
    case.mkdir(parents=True)
    (case / "instruction.txt").write_text(f"SLEEP {sleep_s}\nWRITE done.txt ok\n")
    (case / "validator.py").write_text(VALIDATOR)
    (root / "reg" / "services.json").write_text("[]")
    return root / "reg"


def _timed(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "evalhydra", *args], cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"evalhydra exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return wall


def _results(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("select count(*) from results where status = 'PASS'").fetchone()[0])
    finally:
        conn.close()


def main() -> None:
    """Run both configurations and print the walls and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        registry = _registry(root, args.sleep)
        common = [f"registry={registry}", "eval=agent_cases", "service=fake_agent", f"trials={args.trials}",
                  "run.concurrency=1", "run.progress=false", "report=[json]"]
        single = _timed([*common, f"store.path={root / 'single.db'}", f"hydra.run.dir={root / 'single'}"],
                        root)
        shard_ids = ",".join(str(i) for i in range(args.shards))
        sharded = _timed(["-m", "hydra/launcher=joblib", f"hydra.launcher.n_jobs={args.shards}", *common,
                          f"run.shard_index={shard_ids}", f"run.shard_count={args.shards}",
                          f"store.path={root / 'sharded.db'}", f"hydra.sweep.dir={root / 'sweep'}"], root)
        stored = (_results(root / "single.db"), _results(root / "sharded.db"))
        # the launcher's fixed cost: the same sweep, one trial per shard that does not sleep
        quick = _registry(root / "quick", 0.0)
        floor = _timed(["-m", "hydra/launcher=joblib", f"hydra.launcher.n_jobs={args.shards}",
                        f"registry={quick}", *common[1:3], f"trials={args.shards}", *common[4:],
                        f"run.shard_index={shard_ids}", f"run.shard_count={args.shards}",
                        f"store.path={root / 'floor.db'}", f"hydra.sweep.dir={root / 'floor'}"], root)
    per_shard = args.trials / args.shards * args.sleep
    print(f"agent eval: {args.trials} trials × {args.sleep:g} s sleep, run.concurrency=1")
    print(f"single job            wall={single:6.2f} s  passed={stored[0]}")
    print(f"{args.shards} shards on joblib    wall={sharded:6.2f} s  passed={stored[1]}")
    print(f"launcher floor        wall={floor:6.2f} s  ({args.shards} jobs of one trial without sleep)")
    print(f"sharded / single = {sharded / single:.3f}  (target ≤ 0.4); "
          f"floor + {per_shard:g} s of sleep per shard = {(floor + per_shard) / single:.3f} of single")


if __name__ == "__main__":
    main()
