"""Start-up: the command line leaves out what a run does not use (see bench/startup.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "startup.py"

_PROBE = """
import sys
import evalhydra.cli.app
print(sorted(m for m in ("rich", "pygments", "jinja2", "jsonschema") if m in sys.modules))
import httpx
print(httpx.Client.__name__, "httpx._main" in sys.modules)
import httpx._main  # still importable on purpose
print("cli", callable(httpx._main.main))
"""


def test_the_hydra_app_imports_neither_rich_nor_jinja2_nor_httpx_cli() -> None:
    res = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["[]", "Client False", "cli True"]


def test_a_run_in_a_log_writes_plain_progress_without_rich(tmp_path: Path) -> None:
    probe = ("import runpy, sys\n"
             "sys.argv = ['evalhydra', f'store.path={sys.argv[1]}', 'hydra.run.dir=run']\n"
             "try:\n    runpy.run_module('evalhydra', run_name='__main__')\n"
             "except SystemExit as exc:\n"
             "    print('exit', exc.code, 'rich' in sys.modules, file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "s.db")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.stderr.strip().splitlines()[-1] == "exit 0 False", res.stderr
    assert re.search(r"^\[mock\] 2/2 \(100%\)", res.stderr, re.M), res.stderr


@pytest.mark.slow
def test_startup_bench_prints_every_side_and_the_difference() -> None:
    res = subprocess.run([sys.executable, str(BENCH), "--rounds", "1"], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    for side in ("python", "hydra-min", "hydra-libs", "evalhydra"):
        row = rf"^{side} +\d+\.\d{{3}} +\d+\.\d{{3}} +\d+\.\d{{3}} +\d+\.\d{{3}}$"
        assert re.search(row, res.stdout, re.M), res.stdout
    assert re.search(r"^evalhydra − hydra-libs = -?\d+\.\d{3} s", res.stdout, re.M), res.stdout
    assert re.search(r"^evalhydra default run \d+\.\d{3} s \(target ≤ 0\.8 s: (met|not met)\)$", res.stdout,
                     re.M), res.stdout
