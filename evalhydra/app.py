"""The Hydra entry point. Thin: compose, then hand off to :func:`evalhydra.run.run_config`."""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from evalhydra.schema import register

__all__ = ["hydra_main", "exit_code"]

register()
_EXIT: list[int] = [0]


def exit_code() -> int:
    """The worst exit code of the jobs run in this process."""
    return _EXIT[0]


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> None:
    """Run one job (a single run, or one job of a multirun sweep)."""
    from evalhydra.run import run_config

    hc = HydraConfig.get()
    code = run_config(
        cfg,
        overrides=list(hc.overrides.task),
        output_dir=hc.runtime.output_dir,
        job_num=hc.job.num if hc.mode == RunMode.MULTIRUN else None,
    )
    _EXIT[0] = max(_EXIT[0], code)
    if code == 130:
        raise SystemExit(130)
