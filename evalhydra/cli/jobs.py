"""A Hydra job's entry (one run, or one job of a sweep), and the exit codes a sweep's jobs leave.

:func:`run_config` turns a composed config into a plan, runs it through
:func:`evalhydra.job.run.run_job`, and prints a user-fixable problem as one
``error:`` line (exit 2). A sweep's jobs may run in other processes (joblib,
Ray, SLURM), so each leaves its exit code in its output folder for the sweep's
end to read.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from omegaconf import DictConfig

from evalhydra.core.errors import EvalHydraError
from evalhydra.job.check import check_mcp, check_plan, print_checks
from evalhydra.job.exit_codes import ExitCode
from evalhydra.job.probe import print_quick_probe
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan

__all__ = [
    "JOB_EXIT_FILE",
    "check_only",
    "note_exit_code",
    "record_job_exit",
    "run_config",
    "sweep_exit_code",
    "worst_exit_code",
]


def run_config(
    cfg: DictConfig,
    *,
    overrides: Sequence[str] = (),
    output_dir: str | None = None,
    sweep_dir: str | None = None,
    job_num: int | None = None,
) -> int:
    """Run a composed config; print the summary; return the process exit code.

    User-fixable problems are printed as one ``error:`` message (no traceback)
    and give exit code 2.
    """
    try:
        plan = build_plan(cfg, overrides)
        if _CHECK_ONLY:
            code = print_checks(check_plan(plan), check_mcp(plan))
            print_quick_probe(plan)
            return code
        if sweep_dir:  # a sweep job: its runs row names Hydra's sweep directory itself (not the job
            # folder's parent: a swept value may hold "/") and its job number
            plan = replace(plan, sweep_dir=sweep_dir, job_num=job_num)
        code = run_plan(plan, output_dir=Path(output_dir) if output_dir else None)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = ExitCode.USAGE
    if sweep_dir and output_dir:
        record_job_exit(Path(output_dir), code)
    return code


#: ``evalhydra check``: jobs check their endpoints instead of running.
_CHECK_ONLY: set[bool] = set()


def check_only() -> None:
    """Make this process's jobs check their endpoints (``evalhydra check``) instead of running."""
    _CHECK_ONLY.add(True)


#: A sweep job's exit code, in its output folder (the launching process reads them all).
JOB_EXIT_FILE = ".evalhydra-exit-code"


#: The worst exit code of this process's jobs and sweeps (the command exits with it).
_WORST_EXIT: list[int] = [0]


def note_exit_code(code: int) -> None:
    """Keep ``code`` if it is worse than any seen in this process."""
    _WORST_EXIT[0] = max(_WORST_EXIT[0], code)


def worst_exit_code() -> int:
    """The worst exit code noted in this process."""
    return _WORST_EXIT[0]


def record_job_exit(output_dir: Path, code: int) -> None:
    """Leave a sweep job's exit code where the sweep's end can find it, whatever the launcher."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / JOB_EXIT_FILE).write_text(f"{code}\n", encoding="utf-8")


def sweep_exit_code(sweep_dir: Path, since: float = 0.0) -> int:
    """The worst exit code the sweep's jobs left since ``since`` (a unix time; 0 when none did)."""
    files = [p for p in sweep_dir.rglob(JOB_EXIT_FILE) if p.stat().st_mtime >= since]
    return max((int(p.read_text(encoding="utf-8").strip() or 0) for p in files), default=0)
