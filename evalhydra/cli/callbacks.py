"""Hydra callbacks: the sweep-level report when a multirun ends.

A failed job makes Hydra skip ``on_multirun_end``, and non-basic launchers run
jobs in other processes, so the report is built from the store (runs tagged
with the sweep directory), never from in-memory state. ``evalhydra report
--sweep DIR`` produces the same report afterwards.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from evalhydra.cli.jobs import note_exit_code, sweep_exit_code
from evalhydra.config.defaults import SWEEP_REPORT_FORMATS
from evalhydra.reports.writer import write_run_reports
from evalhydra.store.db import Store, open_store

__all__ = ["SweepReport"]


class SweepReport(Callback):
    """Writes ``<sweep dir>/report/`` comparing every job of the sweep."""

    def __init__(self) -> None:
        self.started = 0.0

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Note when the sweep began (exit codes older than that are another sweep's)."""
        self.started = time.time() - 1.0  # file times may be a little coarse

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Build the sweep report from the store, and take the jobs' worst exit code.

        Jobs run in other processes under joblib, submitit and Ray; each leaves its
        exit code in its folder, so the launching process exits with the worst.
        """
        sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        note_exit_code(sweep_exit_code(sweep_dir, self.started))
        store_path = Path(str(config.store.path)).expanduser().resolve()
        if not store_path.exists():
            return
        store = open_store(store_path)
        try:
            ids = sweep_run_ids(store, sweep_dir)
            if ids:
                out = sweep_dir / "report"
                write_run_reports(store, ids, out, formats=SWEEP_REPORT_FORMATS)
                print(f"sweep report ({len(ids)} jobs): {out}")
        finally:
            store.close()


def sweep_run_ids(store: Store, sweep_dir: Path) -> list[str]:
    """Run ids of the jobs of one sweep, in start order."""
    rows = store.query(
        "select run_id from runs where sweep_dir = ? order by started_at, run_id", [str(sweep_dir)]
    )
    return [r["run_id"] for r in rows]
