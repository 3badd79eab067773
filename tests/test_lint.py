"""Style is part of the build: ruff and mypy must be clean (both come with the test extra)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def test_ruff_is_clean() -> None:
    res = _run("ruff", "check", "evalhydra", "tests", "bench", "hydra_plugins")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    res = _run("mypy", "--no-incremental")
    assert res.returncode == 0, res.stdout + res.stderr
