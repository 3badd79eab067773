"""A run against an endpoint that floods every reply's head ends in seconds, and Ctrl-C ends it
at once with exit 130 (issue 33, item 2). The endpoint is a thread on loopback that answers every
request with a header value that never ends."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import numbered_registry, run_cli, start_cli, wait_for


def _flood(conn: socket.socket) -> None:
    with conn:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nx-flood: ")
            chunk = b"a" * 65536
            while True:
                conn.sendall(chunk)
        except OSError:
            return


@pytest.fixture
def flooding_url() -> Iterator[str]:
    server = socket.create_server(("127.0.0.1", 0), backlog=256)
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=_flood, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    stop.set()
    thread.join()
    server.close()


def _args(registry: Path, url: str, db: Path, *extra: str) -> list[str]:
    return [f"registry={registry}", "eval=g", "service=mock", "service.mock.enabled=false",
            f"service.base_url={url}", "service.timeout_ms=3000", f"store.path={db}", *extra]


@pytest.mark.slow
def test_a_flooding_endpoint_fails_each_cell_fast(flooding_url: str, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 20)
    start = time.monotonic()
    res = run_cli(*_args(registry, flooding_url, tmp_path / "s.db", "run.progress=false"), cwd=tmp_path)
    assert res.returncode == 3, res.stderr  # nothing could be measured
    assert "head is over 64 KiB" in res.stdout
    assert time.monotonic() - start < 20  # was: each cell held until the server gave up


@pytest.mark.slow
def test_ctrl_c_against_a_flooding_endpoint_exits_130_at_once(flooding_url: str, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 3000)
    db = tmp_path / "s.db"
    proc = start_cli(*_args(registry, flooding_url, db, "run.progress=false"), cwd=tmp_path)
    wait_for(lambda: db.exists() and db.stat().st_size > 0, timeout=60)
    time.sleep(1.0)
    pressed = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    took = time.monotonic() - pressed
    assert took < 1.0, took
