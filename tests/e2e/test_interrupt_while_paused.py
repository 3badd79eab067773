"""Issue 59, R3: Ctrl-C while a run waits out a 429's Retry-After ends it at once: exit 130,
marked interrupted, what was stored kept."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import numbered_registry


@pytest.mark.slow
@pytest.mark.parametrize("wait", ["50", "3600"])
def test_ctrl_c_during_a_rate_limit_pause_exits_130_at_once(tmp_path: Path, wait: str) -> None:
    registry = numbered_registry(tmp_path / "reg", 12)
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalhydra", f"registry={registry}", "eval=g.e", "run.progress=false",
         "service.mock.rate_limit_rps=0.001", "service.mock.rate_limit_burst=1",
         f"service.mock.rate_limit_retry_after_s={wait}", "service.retry.retry_after_cap_ms=4000000",
         "service.rate_limit_timeout_s=5000", f"store.path={tmp_path / 's.db'}"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # the first cell answered, the rest refused and waiting
    assert proc.poll() is None, proc.communicate()
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.perf_counter() - sent < 5, err[-2000:]
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("select status, exit_code from runs").fetchall() == [("interrupted", 130)]
    assert db.execute("select count(*) from results where status = 'PASS'").fetchone()[0] >= 1
    db.close()
