"""bench/peers.py runs its own side end to end at a tiny size (the peers' runs are a manual benchmark:
the script installs Inspect AI, promptfoo and lm-eval from the registries first)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "peers.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peers_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_evalhydra_side_runs_checks_and_is_the_ratios_unit(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--sides", "evalhydra", "--n", "40", "--c", "8",
                          "--latency-ms", "1", "--rounds", "2", "--peers-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert "evalhydra" in lines[0]["versions"] and not any(tmp_path.iterdir())  # nothing installed
    runs = [line for line in lines if "side" in line]
    assert [(r["side"], r["sent"], r["passed"]) for r in runs] == [("evalhydra", 40, True)] * 2
    assert all(0 < r["most_in_flight"] <= 8 for r in runs)
    (median,) = [line["median"] for line in lines if "median" in line]
    assert median["ratio_to_evalhydra"] == 1.0 and median["passed"]


def test_each_peers_figure_is_its_median_over_evalhydras_in_the_same_run() -> None:
    rows = [{"side": side, "wall_s": wall, "cpu_s": wall, "passed": True, "most_in_flight": 5}
            for side, wall in (("evalhydra", 2.0), ("inspect", 40.0), ("evalhydra", 4.0), ("inspect", 20.0),
                               ("evalhydra", 3.0), ("inspect", 90.0))]
    rows[3]["passed"] = False
    figures = {f["side"]: f for f in _bench().summarize(rows, 100, 0.5)}
    assert figures["evalhydra"]["wall_s"] == 3.0 and figures["inspect"]["wall_s"] == 40.0
    assert figures["inspect"]["ratio_to_evalhydra"] == 13.33 and figures["inspect"]["ratio_to_wire"] == 80.0
    assert figures["evalhydra"]["passed"] and not figures["inspect"]["passed"]  # one failed run fails it


def test_an_unknown_side_is_refused() -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--sides", "evalhydra,deepeval"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 2
    assert "unknown sides ['deepeval']" in res.stderr
