"""Write a run's (or a sweep's) reports from the store into a directory."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalhydra.store import Store

__all__ = ["write_json_atomic", "write_run_reports", "write_text_atomic"]


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temp file in the same directory and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON (indent 2, UTF-8, trailing newline) atomically."""
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_run_reports(store: Store, run_ids: Sequence[str], out_dir: Path,
                      formats: Sequence[str] = ("json", "md"),
                      baseline_service: str | None = None) -> list[Path]:
    """Regenerate the reports of ``run_ids`` into ``out_dir``; return the files written."""
    from evalhydra.reports import zig
    from evalhydra.reports.markdown import render_markdown

    rows = list(store.run_rows(run_ids))
    runs = sorted(store.runs(run_ids), key=lambda r: (r["started_at"] or "", r["run_id"]))
    services = list(dict.fromkeys(r["service_name"] for r in rows))
    models = {(r["service_name"], r["model"]) for r in rows}
    compare = len(services) > 1 or len(models) > len(services)
    comparisons = zig.baseline_comparisons(rows, baseline_service=baseline_service or (
        services[0] if services else None)) if compare else {"schema_version": 2, "baseline_comparisons": []}
    written: list[Path] = []
    if "json" in formats:
        for name, obj in (("runs.json", zig.runs_json(rows)), ("evals.json", zig.evals_json(rows)),
                          ("baseline_comparisons.json", comparisons)):
            write_json_atomic(out_dir / name, obj)
            written.append(out_dir / name)
    if "md" in formats:
        text = render_markdown(runs, rows, comparisons["baseline_comparisons"])
        write_text_atomic(out_dir / "report.md", text)
        written.append(out_dir / "report.md")
    if "text" in formats:
        write_text_atomic(out_dir / "report.txt", zig.text_report(rows))
        written.append(out_dir / "report.txt")
    return written
