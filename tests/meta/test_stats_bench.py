"""bench/stats_figures.py runs end to end at a tiny size (the full run is a manual benchmark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "stats_figures.py"


@pytest.mark.slow
def test_stats_bench_measures_every_figure_through_the_product(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--replications", "2", "--trials", "3"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    figures = json.loads(res.stdout)
    assert set(figures) == {"coverage_3_trials", "mean_width_3_trials", "coverage_1_trial",
                            "mean_width_1_trial", "false_alarm_rate", "power_15_points",
                            "power_15_points_paired_t"}
    assert all(0.0 <= value <= 1.0 for value in figures.values())
    assert 0.0 < figures["mean_width_3_trials"] < 0.6
