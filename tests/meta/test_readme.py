"""The README's and docs' promises: the quick start, the CI command, the documented queries and commands."""

from __future__ import annotations

import os
import re
import shutil
import site
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalhydra.cli.commands import STORE_COMMANDS, STORELESS_COMMANDS, SUBCOMMANDS
from tests.conftest import REPO
from tests.helpers import run_cli

README = (REPO / "README.md").read_text()
#: The README and the reference in docs/: the documented commands, queries and examples.
DOCS = README + "".join(p.read_text() for p in sorted((REPO / "docs").glob("*.md")))


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_quick_start_is_two_commands_and_ci_runs_the_second() -> None:
    section = README.split("## Quick start", 1)[1].split("## ", 1)[0]
    blocks = [b.strip() for b in _bash_blocks(section)]
    assert blocks == [
        "pip install -e . && python -m evalhydra",
        'pip install -e ".[test]" && python -m pytest -q',
    ]
    ci = (REPO / ".ci" / "run").read_text()
    assert blocks[1] in ci.splitlines()


@pytest.mark.slow
def _summary_shape(text: str) -> list[str]:
    """A summary with what differs between runs masked: paths, run ids, latencies, times, dates."""
    text = re.sub(r"/\S+", "PATH", text.replace("/…", "/"))
    text = re.sub(r"eval-smoke-[0-9a-f]{8}", "RUN", text)
    text = re.sub(r"duration [0-9.]+ s", "duration T s", text)
    lines = []
    for line in text.strip().splitlines():
        if line.startswith("smoke.reply_ok"):  # the table's row: its p50 and p95 latencies vary
            cells = line.split()  # eval service model n cases pass [low, high] p50 p95 retried errors
            assert len(cells) == 12, cells
            cells[8:10] = ["MS", "MS"]
            line = " ".join(cells)
        lines.append(line.rstrip())
    return lines


def test_default_eval_runs_from_any_directory_and_prints_the_readmes_summary(tmp_path: Path) -> None:
    """Issue 60, item 7: the README's sample summary is a real run's, but for paths, ids, times."""
    res = run_cli(cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "smoke.reply_ok" in res.stdout and "2 passed" in res.stdout
    assert (tmp_path / "outputs" / "evalhydra.db").exists()
    sample = README.split("The first command prints progress, then a one-screen summary:", 1)[1]
    sample = sample.split("```", 2)[1].removeprefix("\n")
    printed = res.stdout[res.stdout.index("registry: "):]
    assert _summary_shape(printed) == _summary_shape(sample)


@pytest.mark.slow
def test_help_lists_options_and_every_subcommand_has_help(tmp_path: Path) -> None:
    res = run_cli("--help", cwd=tmp_path)
    assert res.returncode == 0 and "service: " in res.stdout and "mock_slow" in res.stdout
    assert "smoke.reply_ok" in res.stdout and "local" in res.stdout  # registry options are listed too
    options = res.stdout.split("== Options ==", 1)[1].split("\n\n", 1)[1].splitlines()
    assert len(options) > 150 and all("  # " in line for line in options)  # a meaning per option
    assert "  retry:" in res.stdout and "concurrency: 64" in res.stdout
    assert "[HYDRA]" not in res.stdout and "powered by Hydra" not in res.stdout


    for name in sorted(SUBCOMMANDS):
        assert f"`{name}`" in DOCS or f" {name} " in DOCS, f"{name} is not documented"
        out = subprocess.run(
            [sys.executable, "-m", "evalhydra", name, "--help"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert out.returncode == 0, (name, out.stderr)
        assert out.stdout.startswith(f"usage: evalhydra {name}"), name
        reads_a_store = (name in STORE_COMMANDS and name not in STORELESS_COMMANDS) or name == "rejudge"
        assert ("--store" in out.stdout) == reads_a_store, name


def _readme_queries() -> list[str]:
    return re.findall(r'evalhydra query "([^"]+)"', DOCS)


@pytest.mark.slow
def test_readme_sql_examples_run_against_a_real_store(tmp_path: Path) -> None:
    assert run_cli("trials=2", cwd=tmp_path).returncode == 0
    conn = sqlite3.connect(tmp_path / "outputs" / "evalhydra.db")
    queries = _readme_queries()
    assert len(queries) >= 4
    for sql in queries:
        conn.execute(sql).fetchall()
    sqlite_utils_sql = re.search(r'sqlite-utils outputs/evalhydra.db "([^"]+)"', DOCS)
    assert sqlite_utils_sql is not None
    rows = conn.execute(sqlite_utils_sql.group(1)).fetchall()
    assert rows == [("smoke.reply_ok", "mock", 1.0)]


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build a wheel from a copy of the tree (no egg-info, no git) and unpack it."""
    import zipfile

    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns(
        ".git", "outputs", "build", "dist", "*.egg-info", "__pycache__", ".*cache"
    )
    shutil.copytree(REPO, src / "evalhydra-src", ignore=ignore)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(src / "evalhydra-src"),
        ],
        check=True,
        capture_output=True,
        timeout=240,
    )
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(next(dist.glob("evalhydra-*.whl"))) as wheel:
        wheel.extractall(site)
    return site


@pytest.mark.slow
def test_wheel_ships_configs_registry_and_runs_anywhere(wheel_site: Path, tmp_path: Path) -> None:
    for rel in (
        "evalhydra/conf/config.yaml",
        "evalhydra/conf/service/mock.yaml",
        "evalhydra/conf/hydra/job_logging/evalhydra.yaml",
        "evalhydra/registry_data/services.json",
        "evalhydra/registry_data/data/smoke/reply_ok/test.jsonl",
        "evalhydra/registry_data/assets/images/red_mug.png",
        "evalhydra/registry_data/agent_cases/hello-file/validator.py",
        "hydra_plugins/evalhydra_registry/__init__.py",
    ):
        assert (wheel_site / rel).is_file(), rel
    env = {"PYTHONPATH": str(wheel_site), "PYTHONNOUSERSITE": "1"}
    res = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import sys, site; sys.path.insert(0, sys.argv[1]); "
            "site.main(); import evalhydra.__main__ as m; print('FROM', m.__file__, file=sys.stderr); "
            "sys.argv = ['evalhydra', "
            "'run.progress=false']; m.main()",
            str(wheel_site),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert res.returncode == 0, res.stderr
    assert "2 passed" in res.stdout
    assert f"FROM {wheel_site}" in res.stderr, "the unpacked wheel, not the checkout, was imported"


@pytest.mark.slow
def test_an_installed_wheel_runs_from_inside_a_checkout(wheel_site: Path, tmp_path: Path) -> None:
    """``pip install .`` then ``python -m evalhydra`` in the checkout: the checkout's package is
    imported (the working directory comes first) and must find conf/ and registry/ beside it."""
    checkout = tmp_path / "checkout"
    for name in ("evalhydra", "conf", "registry", "hydra_plugins"):
        shutil.copytree(REPO / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    # -S keeps the editable install's import hook out, and with it site.venv(): this process's
    # site-packages (a venv's or the base interpreter's) are passed on instead
    code = ("import os, sys; sys.path[:0] = ['', sys.argv[1], *sys.argv[2].split(os.pathsep)]; "
            "import runpy, evalhydra; print('FROM', evalhydra.__file__, file=sys.stderr); "
            "sys.argv = ['evalhydra', 'run.progress=false']; "
            "runpy.run_module('evalhydra', run_name='__main__')")
    site_dirs = os.pathsep.join(site.getsitepackages())
    res = subprocess.run([sys.executable, "-S", "-c", code, str(wheel_site), site_dirs], cwd=checkout,
                         capture_output=True, text=True, timeout=120, env={"PYTHONNOUSERSITE": "1"})
    assert res.returncode == 0, res.stderr
    assert f"FROM {checkout / 'evalhydra' / '__init__.py'}" in res.stderr
    assert "2 cells, 2 passed" in res.stdout


@pytest.mark.slow
def test_the_readme_pytest_example_passes(tmp_path: Path) -> None:
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", DOCS, flags=re.S) if "def test_" in b]
    (tmp_path / "test_example.py").write_text(block)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
                          "test_example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 passed" in res.stdout
