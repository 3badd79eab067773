"""Issue 60, item 4: ``-m`` (and Hydra's config-directory flags) work anywhere among the arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalhydra.cli.app import flags_first
from tests.helpers import run_cli


def test_hydras_flags_move_before_the_overrides_with_their_values() -> None:
    assert flags_first(["registry=.", "-m", "service=a,b", "--config-dir", "conf", "trials=2"]) == [
        "-m", "--config-dir", "conf", "registry=.", "service=a,b", "trials=2"]
    assert flags_first(["eval=x", "--multirun", "-cd=conf"]) == ["--multirun", "-cd=conf", "eval=x"]
    assert flags_first(["eval=x", "trials=3"]) == ["eval=x", "trials=3"]  # nothing to move


@pytest.mark.slow
def test_a_sweep_with_m_after_its_overrides_runs(tmp_path: Path) -> None:
    done = run_cli("eval=smoke", f"store.path={tmp_path / 's.db'}", "run.progress=false", "-m", "trials=1,2",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sweep report (2 jobs)" in done.stdout
