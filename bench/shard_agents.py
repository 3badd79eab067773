"""Sharding a slow agent eval over joblib: four shards against one job, in one run.

An agent-CLI eval of one case whose trials each sleep 1 s (the shipped fake agent,
``SLEEP 1``), 16 trials, ``run.concurrency=1``: first as one job, then as four
shards (``run.shard_index=0,1,2,3 run.shard_count=4``) on Hydra's joblib launcher
with ``n_jobs=4``. Both walls include process start-up, as a user would time them.

Usage::

    python bench/shard_agents.py [--trials 16] [--sleep 1] [--shards 4]

Two floors are measured in the same run:

* the launcher floor: the same evalhydra sweep with one trial per shard that does
  not sleep (evalhydra's fixed cost on joblib);
* the Hydra floor: a minimal ``@hydra.main`` app (one-key config, no evalhydra)
  swept the same way, each job sleeping what one shard must sleep
  (trials ÷ shards × sleep): the wall no Hydra app sharded on joblib can beat;
* the Hydra + libraries floor: the same jobs, each importing (and touching) the
  libraries evalhydra's design fixes (trio, httpx, sqlite-utils, tabulate)
  first: the floor of any app built on that design.

Target (issue 13): the four shards take at most 0.4 × the single job's wall.
Needs ``pip install "evalhydra[joblib]"``.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from floors import CACHING_ENV, TOUCH_LIBRARIES, hydra_app  # bench/floors.py, beside this script

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


_FLOOR_JOB = f"""\
if cfg.libs:
{textwrap.indent(TOUCH_LIBRARIES, "    ")}
time.sleep(float(cfg.sleep))
"""


def _timed(args: list[str], cwd: Path, program: list[str] | None = None) -> float:
    argv = [sys.executable, *(program or ["-m", "evalhydra"]), *args]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=CACHING_ENV)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[1:3]} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return wall


def _hydra_floor(root: Path, shards: int, sleep_s: float, *, libs: bool) -> float:
    """A minimal Hydra app swept over ``shards`` joblib jobs that each sleep ``sleep_s``.

    With ``libs``, each job first imports and touches what evalhydra's design fixes
    (trio, httpx, sqlite-utils, tabulate).
    """
    app = root / "min_app.py"
    app.write_text(hydra_app(_FLOOR_JOB))
    shard_ids = ",".join(str(i) for i in range(shards))
    sweep = root / ("libs_sweep" if libs else "min_sweep")
    return _timed(["-m", "hydra/launcher=joblib", f"hydra.launcher.n_jobs={shards}", f"+sleep={sleep_s}",
                   f"+libs={libs}", f"+shard={shard_ids}", f"hydra.sweep.dir={sweep}"], root, [str(app)])


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
        hydra_floor = _hydra_floor(root, args.shards, per_shard, libs=False)
        libs_floor = _hydra_floor(root, args.shards, per_shard, libs=True)
    print(f"agent eval: {args.trials} trials × {args.sleep:g} s sleep, run.concurrency=1")
    print(f"single job            wall={single:6.2f} s  passed={stored[0]}")
    print(f"{args.shards} shards on joblib    wall={sharded:6.2f} s  passed={stored[1]}")
    print(f"launcher floor        wall={floor:6.2f} s  ({args.shards} jobs of one trial without sleep)")
    print(f"hydra floor           wall={hydra_floor:6.2f} s  (a minimal Hydra app, {args.shards} joblib jobs "
          f"sleeping {per_shard:g} s each)")
    print(f"hydra + libs floor    wall={libs_floor:6.2f} s  (the same jobs importing trio, httpx, "
          f"sqlite-utils and tabulate first)")
    print(f"sharded / single = {sharded / single:.3f}  (target ≤ 0.4); "
          f"floor + {per_shard:g} s of sleep per shard = {(floor + per_shard) / single:.3f} of single; "
          f"hydra floor / single = {hydra_floor / single:.3f}; "
          f"hydra + libs floor / single = {libs_floor / single:.3f}")


if __name__ == "__main__":
    main()
