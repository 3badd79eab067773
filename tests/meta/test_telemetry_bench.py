"""bench/telemetry.py runs end to end at a tiny size (the full run is a manual benchmark): both
sides run, the exported side wrote its spans, and the ratio is of the two medians."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "telemetry.py"


@pytest.mark.slow
def test_the_telemetry_bench_compares_the_run_with_and_without_the_export(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--cases", "20", "--trials", "2", "--rounds", "1",
                          "--latency-ms", "0"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    figures = json.loads(res.stdout.splitlines()[-1])
    assert figures["cells"] == 40 and figures["export_lines"] >= 2  # cells, then the run's own span
    medians = figures["median_s"]
    assert figures["ratio"] == pytest.approx(medians["file"] / medians["off"], abs=0.01)
    assert res.returncode == (0 if figures["ratio"] <= 1.05 else 1)
