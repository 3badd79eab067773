"""bench/throughput.py runs every side end to end at a tiny size (the full run is a manual benchmark)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "throughput.py"


@pytest.mark.slow
def test_throughput_bench_runs_every_side_against_one_mock() -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--n", "300", "--c", "20", "--latency-ms", "1"],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    for side in ("raw", "aiohttp", "bare-lean"):
        row = rf"^{side} +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+  300$"
        assert re.search(row, res.stdout, re.M), res.stdout
    for side in ("evalhydra-lean", "evalhydra-httpx"):
        assert re.search(rf"^{side} .*  300  stored=300 report=", res.stdout, re.M), res.stdout
    assert re.search(r"^evalhydra-lean wall / raw wall = \d+\.\d{3}", res.stdout, re.M), res.stdout
    assert re.search(r"^evalhydra-lean wall / aiohttp wall = \d+\.\d{3}", res.stdout, re.M), res.stdout
    assert re.search(r"^evalhydra own CPU per cell .* = -?\d+\.\d µs", res.stdout, re.M), res.stdout
    assert re.search(r"^store floor per cell \(SQLite alone.*\) = \d+\.\d µs", res.stdout, re.M), res.stdout


def test_an_unknown_side_is_refused() -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--sides", "raw,curl"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2
    assert "unknown side(s) curl" in res.stderr


@pytest.mark.slow
def test_the_baseline_side_runs_another_tree_and_prints_ratios() -> None:
    """``--baseline DIR`` (here this tree itself) runs evalhydra from DIR beside this tree's."""
    root = BENCH.resolve().parent.parent
    res = subprocess.run([sys.executable, str(BENCH), "--n", "200", "--c", "20", "--latency-ms", "1",
                          "--sides", "bare-lean,evalhydra-lean,baseline-lean", "--baseline", str(root)],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"^baseline-lean .*  200  stored=200 report=", res.stdout, re.M), res.stdout
    for line in ("store floor ÷ baseline's = ", "own CPU per cell ÷ baseline's"):
        assert re.search(rf"^{re.escape(line)}.*\(median \d+\.\d{{3}}", res.stdout, re.M), res.stdout
    refused = subprocess.run([sys.executable, str(BENCH), "--sides", "baseline-lean"], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and "needs --baseline DIR" in refused.stderr
