"""bench/report_scale.py runs end to end on a small store (the full run is a manual benchmark)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "report_scale.py"


@pytest.mark.slow
def test_report_scale_bench_runs_on_a_small_store(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--rows", "2000", "--keep", str(tmp_path), "--junit"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "filled 2,000 results" in res.stdout
    assert "targets for json,md,text (< 10 s, < 300 MB): met" in res.stdout
    floor = r"^floor: one SQLite pass over the run, one string per result: \d+\.\d\d s \(2,000 rows\)$"
    assert re.search(floor, res.stdout, re.M), res.stdout
    grouped = (r"^floor with the groupings: .* on three threads at once: \d+\.\d\d s \(pass \d+\.\d\d s,"
               r" cases \d+\.\d\d s, latency \d+\.\d\d s\)$")
    assert re.search(grouped, res.stdout, re.M), res.stdout
    target = (r"^issue 12 target for json,md,text \(< 5 s\): met; \d+\.\d\d × the floor,"
              r" \d+\.\d\d × the floor with the groupings$")
    assert re.search(target, res.stdout, re.M), res.stdout
    lines = (tmp_path / "report" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2000 and (tmp_path / "report" / "junit.xml").exists()
