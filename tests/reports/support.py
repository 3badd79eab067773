"""Shared helpers of the report tests: a store filled by real mock runs, synthetic rows.

No tests here; other modules import the fixture and helpers.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalhydra.analysis.targetstats import TargetStats
from evalhydra.store.db import Batch, Store, open_store
from tests.conftest import AIWG_FIXTURE

RESULT_SCHEMA = AIWG_FIXTURE / "schemas_eval-result.yaml"


@dataclass
class MockStore:
    """A store written by four real runs through the built-in mock."""

    path: Path
    runs: dict[str, str]  # name → run id: base, flaky (errors), judge (other service), aiwg


MOCK_RUNS = {
    "base": ["eval=smoke", "trials=3"],
    "flaky": ["eval=smoke", "trials=3", "service.model=mock-flaky", "service.mock.fail_rate=0.5",
              "run.concurrency=1"],  # one at a time: the seeded draws fall on the same cells each run
    "judge": ["eval=smoke", "trials=3", "service=mock_judge"],
    "aiwg": ["eval=aiwg", "trials=2"],
}


@pytest.fixture(scope="session")
def mock_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStore]:
    """Run the four mock runs once per session (about two seconds)."""
    from hydra.core.global_hydra import GlobalHydra

    from evalhydra.cli.jobs import run_config
    from evalhydra.compose.compose import compose_config

    root = tmp_path_factory.mktemp("mock_store")
    db = root / "store.db"
    runs = {}
    for name, overrides in MOCK_RUNS.items():
        args = [f"store.path={db}", "run.progress=false", *overrides]
        assert run_config(compose_config(args), overrides=args, output_dir=str(root / name)) == 0
        store = open_store(db, read_only=True)
        runs[name] = store.runs()[0]["run_id"]
        store.close()
    GlobalHydra.instance().clear()
    yield MockStore(db, runs)


def result_row(run_id: str, case: str, trial: int = 1, *, passed: bool = True,
               **extra: Any) -> dict[str, Any]:
    """A complete synthetic ``results`` row (chat, mock-like)."""
    row: dict[str, Any] = {
        "cell_key": f"{run_id}|{extra.get('eval_id', 'g.e')}|{extra.get('service_name', 'svc')}|"
                    f"{extra.get('model', 'm')}|{case}|{trial}",
        "run_id": run_id, "group": "g", "eval_id": "g.e", "service_name": "svc", "model": "m",
        "requested_model": "m", "run_index": trial, "case_id": case, "kind": "chat",
        "status": "PASS" if passed else "FAIL", "input": f"say {case}", "ideal": case,
        "output": case if passed else "wrong", "tool_calls": [], "passed": passed,
        "score": 1.0 if passed else 0.0, "failure_reason": None if passed else "mismatch",
        "status_code": 200, "attempt_count": 1, "retried": False, "latency_ms": 10 + trial,
        "prompt_tokens": 5, "completion_tokens": 1, "cost_usd": 0.001, "attempts": 1,
        "evaluated_at": f"2026-01-01T00:00:{trial:02d}.000Z",
    }
    row.update(extra)
    return row


def write_run(store: Store, run_id: str, rows: Sequence[dict[str, Any]], *,
              started: str = "2026-01-01T00:00:00.000Z") -> None:
    """Store ``rows`` as the cells of a completed run ``run_id``."""
    store.start_run({"run_id": run_id, "kind": "chat", "started_at": started, "status": "completed",
                     "finished_at": started.replace("00:00:00", "00:10:00"), "fingerprint": "f"})
    store.write(Batch(results=list(rows), members=[(run_id, r["cell_key"]) for r in rows]))


def regression_store(path: Path, *, cases: int = 20, broken: int = 10) -> Store:
    """Two runs of the same cases; the candidate fails ``broken`` of them (3 trials each)."""
    store = open_store(path)
    base = [result_row("eval-base-aaaaaaaa", f"c{i:02d}", t) for i in range(cases) for t in (1, 2, 3)]
    cand = [result_row("eval-cand-bbbbbbbb", f"c{i:02d}", t, passed=i >= broken)
            for i in range(cases) for t in (1, 2, 3)]
    write_run(store, "eval-base-aaaaaaaa", base)
    write_run(store, "eval-cand-bbbbbbbb", cand, started="2026-01-02T00:00:00.000Z")
    return store


def random_rows(seed: int, count: int, run_id: str = "eval-rand-cccccccc") -> list[dict[str, Any]]:
    """Rows over 3 services × 3 models × 3 evals in 2 groups, with errors and repeats."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        ok = rng.random() < 0.6
        error = not ok and rng.random() < 0.2
        row = result_row(run_id, f"c{rng.randrange(20)}", rng.randrange(1, 4), passed=ok,
                         service_name=f"svc-{rng.randrange(3)}", model=f"m{rng.randrange(3)}",
                         group=f"g{rng.randrange(2)}", eval_id=f"e{rng.randrange(3)}",
                         retried=rng.random() < 0.2, attempt_count=rng.choice([1, 2, 3, None]),
                         latency_ms=rng.choice([rng.randrange(0, 50), None, rng.randrange(0, 500)]))
        row["cell_key"] = f"k{i}"
        if error:
            row.update(status="ERROR", error_kind="server_error", status_code=503)
        rows.append(row)
    return rows


def result_schema() -> dict[str, Any]:
    """aiwg's eval-result schema exactly as published (its OpenAPI-style ``nullable: true``
    is no JSON Schema keyword, so a null where it types a string is invalid)."""
    schema: dict[str, Any] = yaml.safe_load(RESULT_SCHEMA.read_text())
    return schema


def summary_keys() -> list[str]:
    """The properties of aiwg's summary schema."""
    return list(yaml.safe_load(RESULT_SCHEMA.read_text())["summary_schema"]["properties"])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, parsed."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def target_stats(**fields: Any) -> TargetStats:
    """A :class:`TargetStats` of one scored target, ``fields`` over plain defaults."""
    base: dict[str, Any] = {
        "group": "g", "eval": "g.e", "service": "svc", "model": "m", "n": 3, "passed": 3, "errors": 0,
        "scored": 3, "input_tokens": 0, "output_tokens": 0, "pass_rate": 1.0, "ci_low": 0.4, "ci_high": 1.0,
        "ci_method": "wilson", "n_cases": 3, "pass_hat_k": 1.0, "k": 1, "p50_ms": 1, "p95_ms": 1,
        "reasoning_tokens": 0, "ttft_p50_ms": None, "ttft_p95_ms": None, "first_answer_p50_ms": None,
        "first_answer_p95_ms": None, "retried": 0, "cost_usd": 0.0}
    return TargetStats(**{**base, **fields})
