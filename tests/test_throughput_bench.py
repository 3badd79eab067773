"""bench/throughput.py runs end to end at a tiny size (the full run is a manual benchmark)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "throughput.py"


@pytest.mark.slow
@pytest.mark.parametrize("floor", ["client", "transport"])
def test_throughput_bench_runs_both_sides_against_the_mock(floor: str) -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--n", "300", "--c", "20", "--latency-ms", "1",
                          "--floor", floor], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"floor={floor}" in res.stdout
    assert re.search(r"^bare trio\+httpx .* ok=300$", res.stdout, re.M), res.stdout
    assert re.search(r"^evalhydra .* ok=300  stored=300 ", res.stdout, re.M), res.stdout
    assert re.search(r"evalhydra wall / bare wall = \d+\.\d{3}", res.stdout), res.stdout
