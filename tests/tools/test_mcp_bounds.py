"""Issue 59, D9: an MCP stdio server's stderr is kept to its end, without bound on what it writes
(neither memory nor disk grows), and whatever the server started ends with the cell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import smoke_eval, write_registry

SERVER = str(Path(__file__).with_name("mcp_noisy.py"))
SHOUT_BYTES = 192 << 20
PEAK = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
        " print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_servers_stderr_and_children_end_with_its_cell(tmp_path: Path) -> None:
    pid_file = tmp_path / "children.txt"
    line = json.dumps({"id": "c0", "input": f'Call shout with {{"size": {SHOUT_BYTES}}}. Then reply with'
                                            " exactly done.", "ideal": "done"})
    spec = smoke_eval(loop={"max_turns": 3},
                      mcp=[{"name": "noisy", "command": [sys.executable, SERVER],
                            "env": {"NOISY_PID_FILE": str(pid_file)}, "read_timeout_s": 60}])
    registry = write_registry(tmp_path / "reg", evals={"g/e.json": spec},
                              data={"data/g/e/test.jsonl": line + "\n"})
    # the run in a fresh process that reports the peak RSS of its own children (the run, the server)
    measured = subprocess.run(
        [sys.executable, "-c", PEAK, sys.executable, "-m", "evalhydra", f"registry={registry}", "eval=g.e",
         f"store.path={tmp_path / 's.db'}", "run.progress=false"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    code, peak_kib = (int(v) for v in measured.stdout.split()[-2:])
    assert code == 0, measured.stderr[-3000:]
    assert peak_kib < 150 * 1024, peak_kib  # 192 MB of stderr never held whole
    children = [int(p) for p in pid_file.read_text().split()]
    assert children and not any(_alive(pid) for pid in children), children
