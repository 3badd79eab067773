"""Style is part of the build: ruff and mypy must be clean (both come with the test extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


@pytest.mark.slow
def test_mypy_refuses_assigning_a_field_of_an_immutable_type(tmp_path: Path) -> None:
    # evalhydra.core.values.immutable: frozen for the type checker only (a cheaper __init__).
    snippet = tmp_path / "assign.py"
    snippet.write_text("from evalhydra.core.values import Completion, Usage\n"
                       "c = Completion(output='a', model='m')\n"
                       "c.output = 'b'\n"
                       "u = Usage()\n"
                       "print(u.prompt_tokens)\n")
    res = _run("mypy", "--no-incremental", str(snippet))
    assert res.returncode == 1, res.stdout + res.stderr
    assert 'assign.py:3: error: Property "output" defined in "Completion" is read-only' in res.stdout
    assert res.stdout.count("error:") == 1, res.stdout
