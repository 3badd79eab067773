"""Issue 59, D12: a run's report folder is its own, even when two runs start in the same second."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import start_cli

# each runs evalhydra, a server or a browser in a process of its own: with the slow tests
pytestmark = pytest.mark.slow

def test_two_runs_started_together_write_their_reports_apart(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    procs = [start_cli("run.progress=false", "report=[jsonl]", f"store.path={store}", cwd=tmp_path)
             for n in range(2)]
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    folders = [Path(re.findall(r"^reports: (.+)$", out, re.M)[-1]) for out, _ in outs]
    assert folders[0] != folders[1] and folders[0].parent == folders[1].parent  # same day, own folders
    for folder, (out, _) in zip(folders, outs, strict=True):
        run_id = re.findall(r"^run (eval-\S+):", out, re.M)[-1]
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["run_id"] == run_id
        assert (folder / ".hydra" / "config.yaml").is_file()
