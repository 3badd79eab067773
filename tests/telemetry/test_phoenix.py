"""Issue 64, item 4: a run exported over OTLP/HTTP to a real Arize Phoenix server (the
``arize-phoenix`` package, started on loopback as a subprocess), its spans and verdicts read back
through Phoenix's own client.

Phoenix lives in an environment of its own (``~/.cache/evalhydra-test/phoenix``, made on first
use from the package index): its dependencies (and the pytest plugin it registers) stay out of
the test environment, as the peers' do in ``bench/peers.py``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import evalhydra

PHOENIX = "arize-phoenix==20.26.1"
HOME = Path.home() / ".cache" / "evalhydra-test" / "phoenix"
#: Read the spans back through Phoenix's client, in Phoenix's environment; print them as JSON.
READ_BACK = """
import json, sys
from phoenix.client import Client
spans = Client(base_url=sys.argv[1]).spans.get_spans_dataframe(project_identifier="default")
print(json.dumps([{"name": n, "kind": k, "events": e} for n, k, e in
                  zip(spans["name"], spans["span_kind"], spans["events"])], default=str))
"""


def _python() -> Path:
    """Phoenix's own interpreter, installed once."""
    python = HOME / "bin" / "python"
    marker = HOME / f".{PHOENIX}"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(HOME)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PHOENIX], check=True, timeout=900)
        marker.touch()
    return python


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    python, port = _python(), _free_port()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(Path.home()),
           "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"), "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(_free_port()), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    proc = subprocess.Popen([str(python), "-m", "phoenix.server.main", "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "Phoenix did not start"
            time.sleep(0.5)
        yield url, python
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_a_run_reads_back_from_phoenix_with_its_verdicts(tmp_path: Path, phoenix: tuple[str, Path]) -> None:
    url, python = phoenix
    result = evalhydra.evaluate(["eval=tools.order_desk", f"store.path={tmp_path / 's.db'}",
                                 "telemetry.export=otlp", f"telemetry.endpoint={url}/v1/traces"])
    read = subprocess.run([str(python), "-c", READ_BACK, url], capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": str(Path.home())})
    assert read.returncode == 0, read.stderr[-2000:]
    spans = json.loads(read.stdout.strip().splitlines()[-1])
    agents = [s for s in spans if s["name"] == "invoke_agent mock"]
    assert len(agents) == 2 and {s["kind"] for s in agents} == {"AGENT"}  # Phoenix read the GenAI kinds
    assert {s["name"] for s in spans if s["kind"] == "TOOL"} == {"execute_tool lookup_order",
                                                                "execute_tool refund"}
    for agent in agents:
        verdict, *parts = [e for e in agent["events"] if e["name"] == "gen_ai.evaluation.result"]
        assert verdict["attributes"]["gen_ai.evaluation.name"] == "all_of"
        assert verdict["attributes"]["gen_ai.evaluation.score.label"] == "pass"
        assert verdict["attributes"]["evalhydra.run_id"] == result.run_id
        assert len(parts) == 4 and all(p["attributes"]["evalhydra.composite"] == "all_of" for p in parts)
