"""Hydra callbacks: secrets out of Hydra's saved files, and the sweep-level report.

:class:`RedactSavedConfig` rewrites the job's ``.hydra/`` files (``config.yaml``,
``hydra.yaml``, ``overrides.yaml``) as soon as Hydra has written them, with every
header value and secret-looking value (``*key*``, ``*token*``, …) replaced, so a
literal secret given as an override is not kept on disk.

:class:`SweepReport` writes the sweep-level report when a multirun ends.

A failed job makes Hydra skip ``on_multirun_end``, and non-basic launchers run
jobs in other processes, so the report is built from the store (runs tagged
with the sweep directory), never from in-memory state. ``evalhydra report
--sweep DIR`` produces the same report afterwards.
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from evalhydra.cli.jobs import note_exit_code, sweep_exit_code
from evalhydra.config.defaults import SWEEP_REPORT_FORMATS
from evalhydra.config.redact import redact, redact_overrides
from evalhydra.core.text import command_line, visible
from evalhydra.reports.sweepsummary import sweep_summary
from evalhydra.reports.writer import write_run_reports
from evalhydra.store.db import Store, open_store

__all__ = ["RedactSavedConfig", "SweepReport", "sweep_formats", "sweep_run_ids"]


def sweep_formats(config: DictConfig) -> tuple[str, ...]:
    """The sweep report's formats: json, md and text, and html too when the jobs' ``report`` has it."""
    asked = config.get("report") or ()
    wanted = asked.split(",") if isinstance(asked, str) else [str(f) for f in asked]
    html = ("html",) if "html" in (f.strip().lower() for f in wanted) else ()
    return (*SWEEP_REPORT_FORMATS, *html)


class RedactSavedConfig(Callback):
    """Rewrites a job's ``.hydra/`` files without its secrets (see the module docstring)."""

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Redact the files Hydra saved for this job (they are written just before this)."""
        hydra_cfg = HydraConfig.get()
        if hydra_cfg.output_subdir is None:
            return
        folder = Path(hydra_cfg.runtime.output_dir) / str(hydra_cfg.output_subdir)
        _rewrite(folder / "config.yaml", redact)
        _rewrite(folder / "overrides.yaml", redact_overrides)
        _rewrite(folder / "hydra.yaml", _redact_hydra)
        if hydra_cfg.mode == RunMode.MULTIRUN:  # the sweeper saved the whole sweep's config too
            _rewrite(Path(hydra_cfg.sweep.dir) / "multirun.yaml", lambda data: _redact_hydra(redact(data)))


def _rewrite(path: Path, clean: Any) -> None:
    if not path.is_file():
        return
    data = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    cleaned = clean(copy.deepcopy(data))
    if cleaned != data:  # written aside and renamed: parallel jobs may rewrite multirun.yaml at once
        aside = path.with_name(f".{path.name}.{os.getpid()}")
        OmegaConf.save(OmegaConf.create(cleaned), aside)
        os.replace(aside, path)


def _redact_hydra(data: Any) -> Any:
    """``hydra.yaml`` with the overrides it lists redacted (and the folder name built from them)."""
    node = data.get("hydra", {}) if isinstance(data, dict) else {}
    overrides = node.get("overrides", {})
    for kind in ("task", "hydra"):
        if isinstance(overrides.get(kind), list):
            overrides[kind] = redact_overrides(overrides[kind])
    job = node.get("job", {})
    if isinstance(job.get("override_dirname"), str):
        job["override_dirname"] = ",".join(redact_overrides(job["override_dirname"].split(",")))
    return data


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
        store_path = _sweep_store(config, sweep_dir)
        if store_path is None or not store_path.exists():
            return
        store = open_store(store_path)
        try:
            ids = sweep_run_ids(store, sweep_dir)
            if ids:
                out = sweep_dir / "report"
                write_run_reports(store, ids, out, formats=sweep_formats(config))  # its baseline: job 0's
                print(sweep_summary(store, ids))
                print(f"sweep report ({len(ids)} job{'s' if len(ids) != 1 else ''}): {out}")
        finally:
            store.close()


#: The interpolation that gives each job of a sweep its own store.
_PER_JOB = "${hydra:job.num}"


def _sweep_store(config: DictConfig, sweep_dir: Path) -> Path | None:
    """The store the sweep report reads. With one store per job (``store.path`` naming
    ``${hydra:job.num}``) that is job 0's, and the note says how to report on all of them."""
    raw = str(OmegaConf.to_container(config.store, resolve=False).get("path"))  # type: ignore[union-attr]
    if "${" not in raw:
        return Path(str(config.store.path)).expanduser().resolve()
    if _PER_JOB not in raw:
        report = command_line("evalhydra", "report", "--sweep", sweep_dir, "--store", "MERGED.db")
        print(visible(f"sweep report: store.path={raw} differs per job; merge the job stores, then report on "
                      f"the merged one: {report}", lines=False))
        return None
    jobs = sorted(int(p.parent.parent.name.split("-", 1)[0]) for p in sweep_dir.glob("*/.hydra/config.yaml")
                  if p.parent.parent.name.split("-", 1)[0].isdigit())
    stores = [raw.replace(_PER_JOB, str(n)) for n in jobs or [0]]
    merged = sweep_dir / "merged.db"
    merge = command_line("evalhydra", "merge", "--store", merged, *stores)
    report = command_line("evalhydra", "report", "--sweep", sweep_dir, "--store", merged, "--out",
                          sweep_dir / "report")
    print(visible(f"sweep report: each job wrote its own store; this report covers job 0's ({stores[0]}). "
                  f"For all {len(stores)}: {merge} && {report}", lines=False))
    return Path(stores[0]).expanduser().resolve()


def sweep_run_ids(store: Store, sweep_dir: Path) -> list[str]:
    """Run ids of the jobs of one sweep, in start order."""
    rows = store.query(
        "select run_id from runs where sweep_dir = ? order by started_at, run_id", [str(sweep_dir)]
    )
    return [r["run_id"] for r in rows]
