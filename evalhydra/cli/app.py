"""The Hydra entry point. Thin: choose the registry, compose, run :func:`evalhydra.cli.jobs.run_config`."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from evalhydra.cli.commands import SUBCOMMANDS
from evalhydra.cli.jobs import note_exit_code, run_config, worst_exit_code
from evalhydra.cli.startup import resume_gc
from evalhydra.compose.compose import absolute_sweep_dir, compose_config, params_overrides, register
from evalhydra.compose.hydra_errors import explain
from evalhydra.compose.registry_options import activate
from evalhydra.config.fielddocs import annotated_config
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode

__all__ = ["exit_code", "flags_first", "hydra_main", "options_help", "run_app"]

register()


def exit_code() -> int:
    """The worst exit code of the jobs run by this process (or, in a sweep, by its launcher)."""
    return worst_exit_code()


#: Hydra's flags that take no value, and those that take the next argument.
_FLAGS = ("-m", "--multirun")
_VALUED_FLAGS = ("-cd", "--config-dir", "-cp", "--config-path", "-cn", "--config-name")


def options_help(args: list[str]) -> str:
    """``--help``'s options: the config these arguments compose, each option with its meaning
    (:func:`~evalhydra.config.fielddocs.annotated_config`). ``--config-dir`` joins the search path
    as it does for a run; the other Hydra flags are left out."""
    flags, overrides = _split_flags(args)
    dirs = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag in ("-cd", "--config-dir")]
    dirs += [flag.split("=", 1)[1] for flag in flags if flag.startswith(("-cd=", "--config-dir="))]
    if dirs:
        overrides.append(f"hydra.searchpath=[{','.join('file://' + str(Path(d).absolute()) for d in dirs)}]")
    try:
        cfg = compose_config(overrides)
    except Exception as exc:  # the run's own error said it already; show the defaults
        print(f"(the options below are the defaults: {type(exc).__name__})", file=sys.stderr)
        cfg = compose_config()
    return ("== Options ==\nOverride any of them (key=value); each with its meaning:\n\n"
            + annotated_config(cfg))


def flags_first(args: list[str]) -> list[str]:
    """``args`` with Hydra's ``-m`` and config-directory flags (and their values) moved before the
    overrides: argparse takes no flag once the overrides have begun, so ``registry=. -m
    service=a,b`` would otherwise fail naming arguments never typed."""
    flags, rest = _split_flags(args)
    return [*flags, *rest]


def _split_flags(args: list[str]) -> tuple[list[str], list[str]]:
    """Hydra's flags (with their values), and the rest (the overrides), each in order."""
    flags: list[str] = []
    rest: list[str] = []
    words = iter(args)
    for word in words:
        if word in _FLAGS or word.startswith(tuple(f"{f}=" for f in _VALUED_FLAGS)):
            flags.append(word)
        elif word in _VALUED_FLAGS:
            flags += [word, next(words, "")]
        else:
            rest.append(word)
    return flags, rest


def run_app(args: list[str]) -> int:
    """Run the Hydra app on ``args`` (overrides and Hydra flags); return the exit code."""
    try:
        activate(args)
    except EvalHydraError as exc:  # an unusable registry= path: report it like any config error
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    args = flags_first(args)
    sys.argv = [sys.argv[0], *params_overrides(absolute_sweep_dir(args))]
    full_error = bool(os.environ.get("HYDRA_FULL_ERROR"))
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let Hydra raise: its errors become one line here
    _JOB_STARTED.clear()
    try:
        hydra_main()
    except Exception as exc:
        error = None if full_error else (explain(exc, list(SUBCOMMANDS)) or launcher_error(exc, args)
                                         or _setup_error(exc))
        if error is None:
            raise
        print(f"error: {error}", file=sys.stderr)
        return ExitCode.USAGE
    finally:
        if not full_error:
            os.environ.pop("HYDRA_FULL_ERROR", None)
    return exit_code()


#: Set once a job's function runs: an OSError before it is Hydra failing to set the job up.
_JOB_STARTED: set[bool] = set()


def _setup_error(exc: BaseException) -> EvalHydraError | None:
    """An OSError raised while Hydra made the job's folder (an unusable ``hydra.run.dir``)."""
    if not isinstance(exc, OSError) or _JOB_STARTED:
        return None
    where = f" {exc.filename}" if exc.filename else ""
    return EvalHydraError(f"cannot make the run's output folder{where}: {exc.strerror or exc}.",
                          "Set hydra.run.dir (hydra.sweep.dir for -m) to a folder you can write, or "
                          "leave it at its default (outputs/).")


#: Where a launcher's own code lives: an exception raised there is the launcher's, not a job's.
_LAUNCHER_CODE = ("hydra_plugins/hydra_joblib_launcher", "hydra_plugins/hydra_ray_launcher",
                  "hydra_plugins/hydra_submitit_launcher", "/submitit/", "/ray/", "/joblib/")


def launcher_error(exc: BaseException, args: list[str]) -> EvalHydraError | None:
    """A launcher that cannot start the sweep's jobs (no SLURM here, no Ray cluster at the
    address): one line blaming the launcher, with the fix. None for anything else."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not any(marker in frame.filename for frame in frames for marker in _LAUNCHER_CODE):
        return None
    chosen = [a.partition("=")[2] for a in args if a.partition("=")[0].lstrip("+~") == "hydra/launcher"]
    launcher = chosen[-1] if chosen else "the launcher"
    detail = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
    return EvalHydraError(
        f"hydra/launcher={launcher} could not start the sweep's jobs: {type(exc).__name__}: {detail}",
        "Run where that launcher's cluster is (SLURM's srun and sbatch; a Ray cluster at "
        "hydra.launcher.ray.init.address), or sweep on this machine: hydra/launcher=joblib.")


@hydra.main(config_path="pkg://evalhydra.conf", config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> None:
    """Run one job (a single run, or one job of a multirun sweep)."""
    _JOB_STARTED.add(True)
    resume_gc()
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    code = run_config(
        cfg,
        overrides=list(hc.overrides.task),
        output_dir=hc.runtime.output_dir,
        sweep_dir=str(Path(hc.sweep.dir).resolve()) if multirun else None,
        job_num=int(hc.job.num) if multirun else None,
    )
    note_exit_code(code)
    if code == ExitCode.INTERRUPTED:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the process is on its way out: no traceback
        raise SystemExit(ExitCode.INTERRUPTED)
