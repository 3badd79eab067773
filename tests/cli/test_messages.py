"""Messages that finish the thought: a sweep's closing table and which job failed which gate,
failing cases quoting both sides, launchers that are missing or cannot reach their cluster."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra.errors import MissingConfigException

from evalhydra.compose.hydra_errors import explain
from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

CASES = (
    '{"id": "vienna", "input": "Reply with exactly Vienna.", "ideal": "Vienna"}\n'
    '{"id": "springfield", "input": "Reply with exactly Springfield.", "ideal": "Vienna"}\n'
)


def _registry(tmp_path: Path) -> Path:
    return write_registry(
        tmp_path / "reg",
        evals={"g/e.json": smoke_eval(matcher={"kind": "includes"})},
        data={"data/g/e/test.jsonl": CASES},
    )


@pytest.mark.slow
def test_a_sweep_ends_with_its_table_and_the_job_that_failed_its_gate(tmp_path: Path) -> None:
    res = run_cli(
        "-m",
        f"registry={_registry(tmp_path)}",
        "eval=g.e",
        "service=mock,mock_slow",
        "run.fail_under=0.9",
        "run.progress=false",
        "hydra.sweep.dir=sweep",
        cwd=tmp_path,
    )
    assert res.returncode == 1, res.stderr
    tail = res.stdout.split("sweep report")[0].rstrip().splitlines()
    table_at = next(
        i for i, line in enumerate(tail) if line.startswith("eval ") and "mock:mock-model" in line
    )
    assert re.match(r"g\.e +50\.0% \[[0-9.]+%, [0-9.]+%\] +50\.0% \[", tail[table_at + 2])
    assert tail[table_at + 3] == "verdict: cannot tell against mock: cannot reach p < 0.05 with 2 cases"
    jobs = tail[table_at + 4 :]
    assert len(jobs) == 2
    assert all(
        re.match(r"job \d \(.*service=mock.*\): exit 1, a gate failed: g\.e pass rate 50\.0% < 90\.0%", j)
        for j in jobs
    ), jobs
    folders = sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir() and p.name != "report")
    assert all(re.fullmatch(r"[01]-[0-9a-f]{8}", name) for name in folders), folders


def test_a_failing_case_quotes_what_was_expected_and_what_came(tmp_path: Path) -> None:
    res = run_cli(f"registry={_registry(tmp_path)}", "eval=g.e", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        "g.e springfield trial 1 on mock/mock-model: output did not include ideal "
        "(expected 'Vienna' in output 'Springfield')"
    ) in res.stdout


def test_a_launcher_that_is_not_installed_names_its_extra() -> None:
    missing = MissingConfigException(
        "Could not find 'hydra/launcher/submitit_slurm'",
        missing_cfg_file="hydra/launcher/submitit_slurm",
        options=["basic"],
    )
    error = explain(missing)
    assert error is not None
    assert (error.message, error.hint) == (
        "hydra/launcher=submitit_slurm: the launcher is not installed.",
        "pip install 'evalhydra[slurm]'",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("launcher", "extra"),
    [
        ("hydra/launcher=submitit_slurm", ()),
        ("hydra/launcher=ray", ("+hydra.launcher.ray.init.address=auto",)),
    ],
)
def test_a_launcher_without_its_cluster_is_one_error_line(
    tmp_path: Path, launcher: str, extra: tuple[str, ...]
) -> None:
    res = run_cli("-m", launcher, *extra, "eval=smoke", cwd=tmp_path, env={"RAY_ADDRESS": ""})
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(f"error: {launcher} could not start the sweep's jobs: "), res.stderr
    assert "Traceback" not in res.stderr
