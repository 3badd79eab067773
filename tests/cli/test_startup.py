"""Start-up: the command line leaves out what a run does not use (see bench/startup.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "startup.py"

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


_GC_PROBE = """
import gc, sys
from evalhydra.cli import app

def job(cfg, **kwargs):
    print("job", gc.isenabled(), gc.get_freeze_count() > 0)
    return 0

app.run_config = job
import evalhydra.__main__ as cli
for argv in (sys.argv[1:], ["no_such_key=1"]):
    try:
        cli.main(argv)
    except SystemExit as exc:
        print("exit", exc.code, gc.isenabled())
"""


def test_the_collector_is_off_through_start_up_and_on_for_the_job(tmp_path: Path) -> None:
    """Off while Hydra composes (the job sees it just turned on, with start-up's objects frozen);
    on again after a run, and after a config error that never reached a job."""
    res = subprocess.run([sys.executable, "-c", _GC_PROBE, f"store.path={tmp_path / 's.db'}",
                          f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.stdout.splitlines() == ["job True True", "exit 0 True", "exit 2 True"], res.stderr


def test_resume_gc_freezes_once_and_leaves_a_running_collector_alone() -> None:
    probe = ("import gc\nfrom evalhydra.cli.startup import resume_gc\n"
             "gc.disable(); resume_gc(); frozen = gc.get_freeze_count()\n"
             "print(gc.isenabled(), frozen > 0)\n"
             "junk = [[] for _ in range(1000)]\n"
             "resume_gc(); print(gc.isenabled(), gc.get_freeze_count() == frozen)\n")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert res.stdout.splitlines() == ["True True", "True True"], res.stderr


_NUMPY_PROBE = """
import importlib.util, sys
import evalhydra.cli.app
print("numpy installed", importlib.util.find_spec("numpy") is not None)
print("imported", sorted(m for m in ("numpy", "pandas") if m in sys.modules), "sqlite_utils" in sys.modules)
import numpy
print("importable", numpy.float64(1.5) == 1.5)
"""


def test_the_hydra_app_imports_sqlite_utils_without_numpy() -> None:
    """NumPy is installed (the test extra lists it), so sqlite-utils would import it; the app keeps it out."""
    res = subprocess.run([sys.executable, "-c", _NUMPY_PROBE], capture_output=True, text=True, timeout=60)
    expected = ["numpy installed True", "imported [] True", "importable True"]
    assert res.stdout.splitlines() == expected, res.stderr


def test_a_module_that_needs_what_was_blocked_is_imported_with_it(tmp_path: Path) -> None:
    (tmp_path / "needy.py").write_text("import colorsys\nVALUE = colorsys.rgb_to_hsv(0, 0, 0)\n")
    probe = ("import sys\nfrom evalhydra.cli.startup import _import_without\n"
             "print('colorsys' in sys.modules)\n"
             "_import_without('needy', ('colorsys',))\n"
             "print(sys.modules['needy'].VALUE, sys.modules['colorsys'] is not None)\n")
    res = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)  # `python -c` imports from its working directory first
    assert res.stdout.splitlines() == ["False", "(0.0, 0.0, 0) True"], res.stderr
