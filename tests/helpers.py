"""Helpers for end-to-end tests: a mock server process, a small registry, subprocess runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.conftest import smoke_eval, write_registry

PY = sys.executable


@contextmanager
def mock_process(*args: str) -> Iterator[str]:
    """Run ``python -m evalhydra.services.mock --port 0`` in its own process; yield its base URL."""
    proc = subprocess.Popen(
        [PY, "-m", "evalhydra.services.mock", "--port", "0", *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:"), line
        yield url
    finally:
        terminate(proc, grace_s=5)
        proc.stdout.close()  # type: ignore[union-attr]


def terminate(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM, then SIGKILL if the process has not ended within ``grace_s`` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def mock_call(url: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """GET (or POST ``body`` to) ``<url>/_mock/<path>``."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{url}/_mock/{path}",
        data=data,
        method="POST" if data else "GET",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        return dict(json.loads(resp.read() or b"{}"))


def chat_requests(url: str) -> int:
    """How many chat requests the mock has received."""
    return int(mock_call(url, "stats")["chat_requests"])


def numbered_registry(root: Path, n: int, *, eval_id: str = "g.e") -> Path:
    """A registry with one exact_match eval of ``n`` 'Reply with exactly N.' cases."""
    lines = "".join(
        json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}.", "ideal": f"V{i}"}) + "\n"
        for i in range(n)
    )
    return write_registry(root, evals={"g/e.json": smoke_eval(eval_id)}, data={"data/g/e/test.jsonl": lines})


def run_cli(
    *args: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m evalhydra ARGS`` to completion."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [PY, "-m", "evalhydra", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env
    )


def start_cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """Start ``python -m evalhydra ARGS`` without waiting."""
    return subprocess.Popen(
        [PY, "-m", "evalhydra", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.05) -> None:
    """Poll ``predicate()`` until true or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def stored_results(db: Path) -> int:
    """Cells in the results table, each once whatever its versions (0 if the store does not exist yet)."""
    import sqlite3

    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("select count(distinct cell_key) from results").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def result_row(key: str, run: str = "r1", *, error: str | None = None, at: str | None = None,
               **fields: Any) -> dict[str, Any]:
    """A minimal ``results`` row of eval ``g.e`` on service ``s``/``m`` (PASS, or ERROR with
    ``error``), with ``fields`` on top."""
    return {
        "cell_key": key,
        "run_id": run,
        "group": "g",
        "eval_id": "g.e",
        "service_name": "s",
        "model": "m",
        "run_index": 1,
        "case_id": key,
        "kind": "chat",
        "status": "ERROR" if error else "PASS",
        "passed": error is None,
        "error_kind": error,
        "evaluated_at": at,
        **fields,
    }


def installed_script(name: str) -> str | None:
    """The console script ``name`` of this interpreter's environment (a venv's ``bin/``, whether
    or not the venv is activated), else one on ``PATH``; None when neither has it."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def query_rows(db: Path, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The rows of ``sql`` over the store at ``db``, as dicts."""
    import sqlite3

    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


class _QuietServer(ThreadingHTTPServer):
    request_queue_size = 256  # a run opens dozens of connections at once
    daemon_threads = True


@contextmanager
def http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """A standard-library HTTP server of ``handler`` on 127.0.0.1 in a thread; yields its port."""
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def litellm_in_front_of(url: str, folder: Path, master_key: str) -> Iterator[str]:
    """LiteLLM's proxy (a server no one here wrote) on loopback in front of ``url`` (the mock), for
    chat, the Responses API, files and batches; yields its API root. Clients send ``master_key``."""
    import httpx

    upstream = "sk-mock-upstream-0123456789"
    config = folder / "proxy.yaml"
    config.write_text(
        "model_list:\n  - model_name: mock-model\n    litellm_params:\n      model: openai/mock-model\n"
        f"      api_base: {url}\n      api_key: {upstream}\n"
        f"files_settings:\n  - custom_llm_provider: openai\n    api_base: {url}\n    api_key: {upstream}\n")
    port = free_port()
    env = {**os.environ, "LITELLM_MASTER_KEY": master_key, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "OPENAI_API_BASE": url, "OPENAI_API_KEY": upstream}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "litellm"), "--config", str(config), "--port",
                             str(port), "--host", "127.0.0.1"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def live() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health/liveliness", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(live, timeout=120, interval=0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        terminate(proc, grace_s=20)
