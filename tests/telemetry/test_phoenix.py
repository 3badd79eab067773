"""Issue 64, item 4: a run exported over OTLP/HTTP to a real Arize Phoenix server (the
``arize-phoenix`` package, started on loopback as a subprocess), its spans and verdicts read back
through Phoenix's own client."""

from __future__ import annotations

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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"), "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(_free_port()), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "Phoenix did not start"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_a_run_reads_back_from_phoenix_with_its_verdicts(tmp_path: Path, phoenix: str) -> None:
    from phoenix.client import Client

    result = evalhydra.evaluate(["eval=tools.order_desk", f"store.path={tmp_path / 's.db'}",
                                 "telemetry.export=otlp", f"telemetry.endpoint={phoenix}/v1/traces"])
    spans = Client(base_url=phoenix).spans.get_spans_dataframe(project_identifier="default")
    agents = spans[spans["name"] == "invoke_agent mock"]
    assert len(agents) == 2 and set(agents["span_kind"]) == {"AGENT"}  # Phoenix read the GenAI kinds
    assert set(spans[spans["span_kind"] == "TOOL"]["name"]) == {"execute_tool lookup_order",
                                                                "execute_tool refund"}
    for events in agents["events"]:
        (verdict,) = [e for e in events if e["name"] == "gen_ai.evaluation.result"]
        assert verdict["attributes"]["gen_ai.evaluation.score.label"] == "pass"
        assert verdict["attributes"]["evalhydra.run_id"] == result.run_id
