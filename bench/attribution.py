"""Does ``compare --attribute-server`` find the points a server cost? Faults injected into a known
share of cells, against the truth.

Each replication runs one suite twice through the built-in mock, as two serving stacks: A
answers as it should; B's server leaves a share k of its replies' tool calls in the content as
template markup (``tool_wire=marker_in_content``, ``tool_wire_rate=k``), with
``service.record_wire=true``. Half the cells are tool calls (A passes each; a faulted one fails
through B), half are a coin the model tosses on each side ("Reply yes with probability 0.5"):
discordant cells no server caused. The truth is the share of cells whose tool calls B's server
faulted (the mock counts them); the estimate is ``attribute_server``'s points lost to B's server.
Target (issue 65): within ±1.5 points of the truth for k ∈ {5, 15, 30} %, 1,000 cells, 20 seeds.

Usage::

    python bench/attribution.py                     # 1,000 cells, 20 seeds, k = 5, 15, 30 %
    python bench/attribution.py --cells 200 --seeds 2
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import evalhydra  # noqa: E402
from evalhydra.probe.attribution import attribute_server  # noqa: E402
from tests.conftest import write_registry  # noqa: E402
from tests.helpers import mock_call, mock_process  # noqa: E402

WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "parameters_json": '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}'}
SHARES = (0.05, 0.15, 0.30)
TOLERANCE = 0.015


def suite(root: Path, cells: int) -> Path:
    """A registry of ``cells`` cases: half tool calls, half coins."""
    half = cells // 2
    tools = "".join(json.dumps({"id": f"t{i}", "input": f'Call get_weather with {{"city": "City {i}"}}.',
                                "expected_tool_calls": [_expected(f"City {i}")]}) + "\n" for i in range(half))
    coins = "".join(json.dumps({"id": f"c{i}", "input": "Reply yes with probability 0.5.", "ideal": "yes"})
                    + "\n" for i in range(cells - half))
    return write_registry(root, evals={
        "sim/tools.json": {"id": "sim.tools", "group": "sim", "description": "tool calls",
                           "dataset_path": "data/tools.jsonl", "split": "test", "tools": [WEATHER],
                           "matcher": {"kind": "tool_call"}, "default_run_count": 1},
        "sim/coins.json": {"id": "sim.coins", "group": "sim", "description": "coins",
                           "dataset_path": "data/coins.jsonl", "split": "test",
                           "matcher": {"kind": "exact_match"}, "default_run_count": 1}},
        data={"data/tools.jsonl": tools, "data/coins.jsonl": coins})


def _expected(city: str) -> dict[str, str]:
    return {"name": "get_weather", "arguments_json": json.dumps({"city": city})}


def replication(work: Path, registry: Path, seed: int, share: float) -> dict[str, float]:
    """One run through each stack into one store; the truth and the estimate."""
    store = work / f"s{seed}-{share}.db"
    common = [f"registry={registry}", "eval=sim", f"store.path={store}",
              f"hydra.run.dir={work / 'out'}", "service.mock.enabled=false", "service.record_wire=true",
              "report=[]"]
    with mock_process("--seed", str(seed)) as url_a, mock_process("--seed", str(seed + 1000)) as url_b:
        mock_call(url_b, "config", {"tool_wire": "marker_in_content", "tool_wire_rate": share})
        run_a = evalhydra.evaluate([*common, f"service.base_url={url_a}", "service.name=direct"]).run_id
        run_b = evalhydra.evaluate([*common, f"service.base_url={url_b}", "service.name=proxied"]).run_id
        faulted = mock_call(url_b, "stats")["faults"].get("tool_wire", 0)
    conn = sqlite3.connect(store)
    found = attribute_server(conn, run_a or "", run_b or "")
    conn.close()
    assert found.points is not None
    points = found.points
    return {"seed": seed, "share": share, "run_a": run_a, "run_b": run_b, "cells": found.cells,
            "truth": faulted / found.cells, "estimate": points.difference, "ci_low": points.ci_low,
            "ci_high": points.ci_high, "model_differences": found.model}


def main() -> int:
    """Run every replication; print each and a summary as JSON lines; exit 0 when all held."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="evalhydra-attribution-"))
    registry = suite(work / "registry", args.cells)
    rows = [replication(work, registry, seed, share) for share in SHARES for seed in range(1, args.seeds + 1)]
    for row in rows:
        print(json.dumps(row))
    worst = max(abs(r["estimate"] - r["truth"]) for r in rows)
    covered = sum(r["ci_low"] <= r["truth"] <= r["ci_high"] for r in rows) / len(rows)
    print(json.dumps({"replications": len(rows), "worst_error_points": round(100 * worst, 3),
                      "interval_covers_truth": round(covered, 3), "target_points": 100 * TOLERANCE}))
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    raise SystemExit(main())
