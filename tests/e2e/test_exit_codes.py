"""The exit-code contract, run as a CI would: 0 ok, 1 a gate failed, 2 usage or configuration,
3 nothing could be measured, 130 interrupted; every usage error is one ``error:`` line."""

from __future__ import annotations

import os
import pty
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import chat_requests, mock_process, numbered_registry, run_cli, stored_results


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _store_with_a_result(path: Path) -> bytes:
    res = run_cli(f"store.path={path}", "run.progress=false", cwd=path.parent)
    assert res.returncode == 0, res.stderr
    return path.read_bytes()


def _newer_store(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("pragma user_version = 99")
    conn.close()  # checkpoints the WAL, so the file holds everything before it is compared


USAGE_ERRORS = {
    "unknown service": (["service=mok"], "service=mok: there is no service named 'mok'",
                        "Did you mean: mock?"),
    "bad value": (["trials=abc"], "trials=abc: Value 'abc' of type 'str' could not be converted to Integer",
                  None),
    "unknown key": (["trails=3"], "trails: no such config key.", "Did you mean: trials?"),
    "unknown nested key": (["run.concurency=3"], "run.concurency: no such config key.",
                           "Did you mean: concurrency?"),
    "unknown subcommand": (["rnus", "eval=smoke"], "'rnus' is neither a subcommand nor an override",
                           "Did you mean: runs?"),
    "unparsable override": (["trials=[1"], "cannot parse override 'trials=[1'", None),
    "missing config dir": (["--config-dir", "/nonexistent/conf"],
                           "Additional config directory '/nonexistent/conf' not found", None),
    "unknown eval": (["eval=smok"], "eval=smok: there is no eval named 'smok'", "Did you mean: smoke"),
    "unknown report format": (["report=[pdf]"], "report: Unknown report format: pdf.", "Use any of:"),
    "missing registry": (["registry=/nonexistent/reg"], "registry=/nonexistent/reg: no such directory.",
                         None),
    "unwritable store": (["store.path=/proc/nope/s.db"], "store.path=/proc/nope/s.db: cannot open the store",
                         None),
    "bad range": (["run.max_error_rate=2"], "run.max_error_rate=2.0: must be in 0..1.", None),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_usage_errors_exit_2_with_one_error_line(case: str, tmp_path: Path) -> None:
    args, first, hint = USAGE_ERRORS[case]
    res = run_cli(*args, "run.progress=false", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: {first}"), res.stderr
    assert len(lines) <= 4, res.stderr  # the error, then at most a hint and the options
    assert "Traceback" not in res.stderr and "HYDRA_FULL_ERROR" not in res.stderr
    assert "search path" not in res.stderr.lower()
    if hint:
        assert hint in res.stderr
    assert not (tmp_path / "outputs" / "evalhydra.db").exists()  # nothing ran, nothing was stored


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["corrupt", "newer"])
def test_an_unusable_store_is_refused_before_any_call_and_left_untouched(kind: str, tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    if kind == "corrupt":
        db.write_bytes(b"not a database, just text" * 100)
        before, message = db.read_bytes(), "cannot open the store (file is not a database)"
    else:
        _store_with_a_result(db)
        _newer_store(db)
        before, message = db.read_bytes(), "the store has schema version 99, newer than this evalhydra's"
    res = run_cli(f"store.path={db}", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr.splitlines()[0], res.stderr
    assert db.read_bytes() == before
    if kind == "newer":  # read-only commands still work
        listing = run_cli("runs", "--store", str(db), cwd=tmp_path)
        assert listing.returncode == 0 and "eval-smoke-" in listing.stdout, listing.stderr


@pytest.mark.slow
def test_a_dead_endpoint_exits_3_naming_the_reason_and_the_fix(tmp_path: Path) -> None:
    port = closed_port()
    res = run_cli("service=mock", "service.mock.enabled=false",
                  f"service.base_url=http://127.0.0.1:{port}/v1", "run.progress=false", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert "smoke.reply_ok  mock       mock-model    2        0  —       —" in res.stdout  # no 0.0 %
    assert f"ConnectError: all attempts to connect to 127.0.0.1:{port} failed — 2 cells" in (
        res.stdout)
    assert f"fix: service 'mock': nothing answered at http://127.0.0.1:{port}/v1" in res.stdout
    assert "error: could not measure: smoke.reply_ok on mock/mock-model: no scored cell" in res.stderr


@pytest.mark.slow
def test_a_sweep_exits_with_its_worst_jobs_code(tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 2)
    with mock_process() as url:
        dead = f"http://127.0.0.1:{closed_port()}/v1"
        res = run_cli("-m", f"registry={registry}", "eval=g", "service=mock", "service.mock.enabled=false",
                      f"service.base_url={url},{dead}", "run.progress=false", "hydra.sweep.dir=sweep",
                      cwd=tmp_path)
        assert chat_requests(url) == 2
    assert res.returncode == 3, res.stderr
    assert res.stdout.count("reports:") == 2


@pytest.mark.slow
def test_the_endpoint_is_part_of_a_cells_identity(tmp_path: Path) -> None:
    """Pointing the same service at another endpoint re-sends its cells; the same endpoint does not."""
    registry = numbered_registry(tmp_path / "reg", 3)
    args = [f"registry={registry}", "eval=g", "service=mock", "service.mock.enabled=false",
            "run.progress=false"]
    with mock_process() as first, mock_process() as second:
        assert run_cli(*args, f"service.base_url={first}", cwd=tmp_path).returncode == 0
        again = run_cli(*args, f"service.base_url={first}", "service.timeout_ms=999", cwd=tmp_path)
        assert again.returncode == 0
        assert chat_requests(first) == 3  # a timeout is not part of the identity
        assert run_cli(*args, f"service.base_url={second}", cwd=tmp_path).returncode == 0
        assert chat_requests(second) == 3


@pytest.mark.slow
def test_version_names_evalhydra(tmp_path: Path) -> None:
    res = run_cli("--version", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == "evalhydra 0.1.0"


@pytest.mark.slow
def test_a_judge_service_from_config_dir_works_as_judge_service(tmp_path: Path) -> None:
    conf = tmp_path / "my_conf" / "service"
    conf.mkdir(parents=True)
    (conf / "my_judge.yaml").write_text("name: my_judge\ndefault_model: mock-judge\nmock:\n  enabled: true\n")
    res = run_cli("--config-dir", str(tmp_path / "my_conf"), "eval=quality", "judge_service=my_judge",
                  "run.progress=false", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "quality.helpful_summary" in res.stdout


@pytest.mark.slow
def test_the_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """On a pseudo-terminal the rich bar shows counts, elapsed time and an ETA."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "evalhydra", "trials=50"], cwd=tmp_path,
                            stdin=follower, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(60)
    os.close(leader)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    assert proc.returncode == 0
    final = screen.strip().splitlines()[-2]  # the bar's last frame, above the summary
    assert "0/100" in screen and "━" in screen and "eta" in screen
    assert "✓100 ✗0 !0" in screen, final  # a terminal of 80 columns: the compact counts


@pytest.mark.slow
def test_a_dead_endpoint_stops_the_run_after_its_first_cells(tmp_path: Path) -> None:
    """200 cells against a closed port: sent until 20 have all failed to connect, then exit 3."""
    port = closed_port()
    args = ["eval=matchers", "trials=5", "service=mock", "service.mock.enabled=false",
            f"service.base_url=http://127.0.0.1:{port}/v1", "run.progress=false",
            f"store.path={tmp_path / 's.db'}"]
    res = run_cli(*args, cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert "stopped sending to service 'mock': the first" in res.stderr and "not sent" in res.stderr
    stored = stored_results(tmp_path / "s.db")
    assert 20 <= stored < 200
    assert res.stdout.count("ConnectError") == 1  # one line for the same failure across every eval
    assert sum(line.startswith("error:") for line in res.stderr.splitlines()) == 1
    everything = run_cli(*args, "run.fail_fast=false", cwd=tmp_path)
    assert everything.returncode == 3 and stored_results(tmp_path / "s.db") == 200
