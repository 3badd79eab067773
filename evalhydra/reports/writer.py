"""Write a run's (or a sweep's) reports from the store into a directory.

Formats (``formats`` / ``report --format``):

* ``json``: ``runs.json``, ``evals.json``, ``baseline_comparisons.json``
  (zig_eval, schema_version 2) and ``trials.json`` (pass@k, flakiness).
* ``jsonl``: aiwg's records, ``results.jsonl`` (appended per run, never
  duplicated) and ``summary.json``. A finished run always writes them
  (``cumulative=True``): into its report directory and into the cumulative
  ``results.jsonl`` next to the store.
* ``md``: ``report.md`` and the short ``summary.md`` (GitHub step summary).
* ``text``: zig_eval's text report, ``report.txt``.
* ``junit``: ``junit.xml``.

Everything is computed in SQLite. The per-result files (``runs.json``,
``results.jsonl``) are streamed by worker threads on their own read-only
connections while the main thread computes the aggregates (the per-case
statement, which sorts every result as the totals' does, on another worker when
a core is left for it), so a report over a million results takes seconds and
little memory.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

from evalhydra.analysis.aggregate import case_rows
from evalhydra.analysis.compare import split_paired
from evalhydra.analysis.data import collect, sweep_baseline_of
from evalhydra.analysis.evalstats import Totals
from evalhydra.analysis.judges import has_labels
from evalhydra.analysis.runsummary import saved_summary_of
from evalhydra.analysis.selection import Selection, select_runs
from evalhydra.analysis.zigstats import SCHEMA_VERSION
from evalhydra.config.defaults import DEFAULT_REPORT_FORMATS
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.zig_numbers import integral_numbers
from evalhydra.reports.aiwg import append_run_lines, result_lines, summary_json
from evalhydra.reports.atomic import stream_atomic, write_json_atomic, write_text_atomic
from evalhydra.reports.html import write_html
from evalhydra.reports.junit import write_junit
from evalhydra.reports.markdown import render_markdown, render_summary_md
from evalhydra.reports.openai_shape import OPENAI_FILES, write_openai_files
from evalhydra.reports.streams import write_runs_json
from evalhydra.reports.trials import trials_json
from evalhydra.reports.zig import format_text_report
from evalhydra.reports.zrb import experiment_from_store, write_agent_artifacts
from evalhydra.reports.zrb_markdown import render_zrb_report
from evalhydra.store.connection import read_only_uri
from evalhydra.store.db import Store

__all__ = [
    "ALL_FORMATS",
    "REPORT_FILES",
    "normalize_formats",
    "write_run_reports",
]

ALL_FORMATS = ("json", "jsonl", "md", "text", "junit", "html", "openai")
#: Every file a report may write into its folder (``report --out`` removes stale ones).
REPORT_FILES = frozenset({
    "runs.json", "evals.json", "baseline_comparisons.json", "paired_comparisons.json", "trials.json",
    "results.jsonl", "summary.json", "report.md", "summary.md", "report.txt", "junit.xml", "report.html",
    "results.json", "experiment.json", *OPENAI_FILES})


def normalize_formats(formats: str | Iterable[str]) -> tuple[str, ...]:
    """``"json,md"`` or ``["json", "md"]`` → a tuple of known formats.

    Raises:
        EvalHydraError: On an unknown format.
    """
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    out = tuple(dict.fromkeys(str(f).strip().lower() for f in items if str(f).strip()))
    unknown = [f for f in out if f not in ALL_FORMATS]
    if unknown:
        raise EvalHydraError(f"Unknown report format: {', '.join(unknown)}.",
                             f"Use any of: {', '.join(ALL_FORMATS)}.")
    return out


def _read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection for one report thread."""
    conn = sqlite3.connect(read_only_uri(path), uri=True, timeout=30, check_same_thread=False)
    conn.execute("pragma query_only = 1")
    return conn


# --- streamed files (worker threads) ------------------------------------------


def _runs_json_job(db: Path, sel: Selection, path: Path) -> list[Path]:
    with closing(_read_only(db)) as conn:
        stream_atomic(path, lambda out: write_runs_json(conn, sel, out))
    return [path]


def _jsonl_job(db: Path, sel: Selection, paths: Sequence[Path]) -> list[Path]:
    """Append each run's lines to every file in ``paths`` that lacks that run."""
    with closing(_read_only(db)) as conn:
        for run_id in sel.run_ids:
            one = sel if len(sel.run_ids) == 1 else select_runs(conn, [run_id])
            append_run_lines(paths, run_id, partial(result_lines, conn, run_id, one))
    return [paths[0]]


def _usable_cores() -> int:
    """The CPUs this process may run on (its affinity: a CI container's share, say)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _case_rows_job(db: Path, sel: Selection) -> list[tuple[Any, ...]]:
    """The per-case statement, beside the main thread's totals (each sorts every result).

    Only when a core is left for it beside the streamed files and the main thread: with
    fewer cores, a third SQLite-bound thread only competes for them and the report takes
    longer (``bench/report_scale.py``).
    """
    with closing(_read_only(db)) as conn:
        return case_rows(conn, sel)


# --- aggregate files (main thread) --------------------------------------------


def _json_files(conn: sqlite3.Connection, data: Any, sel: Any, out_dir: Path,
                formats: Sequence[str]) -> list[Path]:
    docs: dict[str, Any] = {}
    if "json" in formats:
        docs["evals.json"] = integral_numbers(data.evals_doc)
        seed, paired = split_paired(data.comparisons)
        docs["baseline_comparisons.json"] = integral_numbers({"schema_version": SCHEMA_VERSION,
                                                              "baseline_comparisons": seed})
        docs["paired_comparisons.json"] = {"schema_version": SCHEMA_VERSION, "paired_comparisons": paired}
        docs["trials.json"] = trials_json(data)
    if "jsonl" in formats:
        if len(sel.run_ids) == 1:
            targets = data.cases.targets if data is not None else None
            docs["summary.json"] = summary_json(conn, sel.run_ids[0], sel, targets)
        else:
            docs["summary.json"] = [summary_json(conn, rid, select_runs(conn, [rid]))
                                    for rid in sel.run_ids]
    for name, doc in docs.items():
        write_json_atomic(out_dir / name, doc)
    return [out_dir / name for name in docs]


def _text_files(conn: sqlite3.Connection, data: Any, sel: Any, out_dir: Path,
                formats: Sequence[str], comparison: dict[str, Any] | None = None,
                experiment: dict[str, Any] | None = None) -> list[Path]:
    if data is None:
        return []
    written = []
    if "md" in formats:
        written += _markdown_files(data, out_dir, experiment)
    if "text" in formats:
        write_text_atomic(out_dir / "report.txt", format_text_report(data.evals_doc))
        written.append(out_dir / "report.txt")
    if "junit" in formats:
        stream_atomic(out_dir / "junit.xml", lambda out: write_junit(conn, sel, data, out))
        written.append(out_dir / "junit.xml")
    if "html" in formats:
        stream_atomic(out_dir / "report.html",
                      lambda out: write_html(conn, sel, data, out, comparison=comparison))
        written.append(out_dir / "report.html")
    return written


def _markdown_files(data: Any, out_dir: Path, experiment: dict[str, Any] | None) -> list[Path]:
    """report.md and summary.md. For agent trials only, report.md is zrb's document and
    evalhydra's own report goes to ``evalhydra_report.md``."""
    ours = render_markdown(data)
    write_text_atomic(out_dir / "summary.md", render_summary_md(data))
    if experiment is None or len(experiment["results"]) != data.cases.total:
        write_text_atomic(out_dir / "report.md", ours)
        return [out_dir / "report.md", out_dir / "summary.md"]
    write_text_atomic(out_dir / "report.md", render_zrb_report(experiment))
    write_text_atomic(out_dir / "evalhydra_report.md", ours)
    return [out_dir / "report.md", out_dir / "evalhydra_report.md", out_dir / "summary.md"]


def write_run_reports(store: Store, run_ids: Sequence[str], out_dir: Path,
                      formats: str | Iterable[str] = DEFAULT_REPORT_FORMATS,
                      baseline_service: str | None = None, *, cumulative: bool = True,
                      baseline_models: dict[str, str] | None = None,
                      comparison: dict[str, Any] | None = None,
                      summary: Mapping[str, Any] | None = None,
                      on_totals: Callable[[Totals], None] | None = None) -> list[Path]:
    """Regenerate the reports of ``run_ids`` into ``out_dir``; return the files written.

    Args:
        store: An open store (read-only is fine).
        run_ids: Full run ids (one run, several, or a sweep's).
        out_dir: Target directory (created).
        formats: Any of :data:`ALL_FORMATS`.
        baseline_service: Baseline of service comparisons (default: a sweep's first value swept,
            :func:`~evalhydra.analysis.data.sweep_baseline_of`; else the first service).
        cumulative: What a finished run does: write the aiwg records (``jsonl``)
            whatever ``formats`` says, into ``out_dir`` and into the cumulative
            ``results.jsonl`` next to the store (runs already there are skipped).
        baseline_models: Baseline model per service (default: first seen).
        comparison: A ``compare`` result (its JSON document) that report.html shows.
        summary: The run summary of ``run_ids`` (:func:`~evalhydra.analysis.runsummary.run_summary`),
            which names the targets' judges (default: the runs' saved summaries, else a pass
            over the results).
        on_totals: Given the per-target totals the reports computed (none for ``jsonl`` alone),
            which the one-screen summary then reads instead of computing them again.
    """
    fmts = normalize_formats(formats)
    if cumulative and "jsonl" not in fmts:
        fmts += ("jsonl",)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = sorted(store.runs(run_ids), key=lambda r: (r["started_at"] or "", r["run_id"]))
    with closing(_read_only(store.path)) as conn, ThreadPoolExecutor(
            max_workers=3, thread_name_prefix="evalhydra-report") as pool:
        sel = select_runs(conn, run_ids)
        if baseline_service is None and baseline_models is None:  # a sweep's: the first value swept
            baseline_service, baseline_models = sweep_baseline_of(conn, run_ids)
        if summary is None and has_labels(conn):  # only the Judges section reads it
            summary = saved_summary_of(conn, run_ids)
        jobs = _submit_streams(pool, store, sel, out_dir, fmts, cumulative)
        data = None
        if set(fmts) - {"jsonl"}:  # aiwg's records alone need no aggregates
            cases = pool.submit(_case_rows_job, store.path, sel) if _usable_cores() > len(jobs) + 1 else None
            data = collect(conn, sel, runs, baseline_service=baseline_service,
                           baseline_models=baseline_models, case_rows=cases.result if cases else None,
                           summary=summary, on_totals=on_totals)
        experiment = _agent_experiment(store, runs)
        written = _json_files(conn, data, sel, out_dir, fmts)
        if "openai" in fmts:
            written += write_openai_files(conn, sel, out_dir)
        written += _text_files(conn, data, sel, out_dir, fmts, comparison, experiment)
        if "json" in fmts and experiment is not None:
            written += write_agent_artifacts(experiment, out_dir)
        for job in jobs:
            written += job.result()
    return written


def _agent_experiment(store: Store, runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """zrb's experiment document when the runs hold agent trials (None otherwise).

    Only agent runs (``runs.kind``) hold agent trials, so chat runs cost no query.
    """
    agent_runs = [r["run_id"] for r in runs if r.get("kind") == "agent"]
    if not agent_runs:
        return None
    marks = ",".join("?" * len(agent_runs))
    rows = list(store.query(
        "select distinct r.* from run_cells rc join results r on r.cell_key = rc.cell_key"
        " and r.run_id = rc.result_run_id "
        f"where rc.run_id in ({marks}) and r.kind = 'agent' "
        "order by r.model, r.case_id, r.run_index", agent_runs))
    return experiment_from_store([r for r in runs if r.get("kind") == "agent"], rows) if rows else None


def _submit_streams(pool: ThreadPoolExecutor, store: Store, sel: Selection, out_dir: Path,
                    formats: Sequence[str], cumulative: bool) -> list[Future[list[Path]]]:
    jobs = []
    if "json" in formats:
        jobs.append(pool.submit(_runs_json_job, store.path, sel, out_dir / "runs.json"))
    if "jsonl" in formats:
        paths = [out_dir / "results.jsonl"]
        shared = store.path.resolve().parent / "results.jsonl"
        if cumulative and shared != paths[0].resolve():
            paths.append(shared)
        jobs.append(pool.submit(_jsonl_job, store.path, sel, paths))
    return jobs

