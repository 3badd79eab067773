"""Comparisons from finished runs' saved per-case fractions give exactly what the pass over their
results gives (issue 50: two large runs compared in seconds), and fall back when they do not hold."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from evalhydra.analysis import comparison as comparecmd
from evalhydra.analysis.comparison import Target, compare, side_of
from evalhydra.analysis.runsummary import run_summary
from evalhydra.store.db import Batch, Store, open_store
from evalhydra.store.fractions import fractions_valid, parse_digest
from tests.reports.support import result_row, write_run

BASE, CAND = "eval-base-aaaaaaaa", "eval-cand-bbbbbbbb"


def _rows(rng: random.Random, run_id: str) -> list[dict[str, Any]]:
    """Cells over 2 services × 2 models × 2 evals, 3 trials: verdicts at random, some judged the
    other way on the same output (a flip), some infrastructure errors, some streamed."""
    rows = []
    for service in ("svc-0", "svc-1"):
        for model in ("m0", "m1"):
            for eval_id in ("e0", "e1"):
                for case in range(12):
                    for trial in (1, 2, 3):
                        ok = rng.random() < 0.6
                        row = result_row(run_id, f"c{case}", trial, passed=ok, service_name=service,
                                         model=model, eval_id=eval_id,
                                         output=rng.choice(["same", f"c{case}", "wrong"]),
                                         ttft_ms=rng.choice([None, rng.randrange(5, 500)]))
                        if rng.random() < 0.1:
                            row.update(status="ERROR", error_kind="server_error", status_code=503,
                                       passed=False)
                        row["cell_key"] = f"{service}|{model}|{eval_id}|{case}|{trial}"
                        rows.append(row)
    return rows


def _store(path: Path, seed: int) -> Store:
    rng = random.Random(seed)
    store = open_store(path)
    for run_id, started in ((BASE, "2026-01-01T00:00:00.000Z"), (CAND, "2026-01-02T00:00:00.000Z")):
        write_run(store, run_id, _rows(rng, run_id), started=started)
        store.save_run_summary(run_id, run_summary(store.conn, [run_id]))
    return store


def _slow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comparecmd, "_fractions_side", lambda *args: None)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("base", "cand", "evals"), [
    ("@svc-0:m0", "@svc-0:m0", ()),
    ("@svc-0:m1", "@svc-1:m1", ()),
    ("@svc-1:m0", "@svc-1:m1", ("e1",)),
    ("", "", ()),  # several targets per case: the saved fractions cannot pool them, results do
])
def test_saved_fractions_compare_as_the_results_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int,
                                                   base: str, cand: str, evals: tuple[str, ...]) -> None:
    store = _store(tmp_path / "s.db", seed)
    targets = [Target(f"{run}{suffix}", (run,), *comparecmd.parse_target(suffix)[1:])
               for run, suffix in ((BASE, base), (CAND, cand))]
    assert side_of(targets[0], evals, store.conn).fractions == bool(base)
    fast = compare(store.conn, *targets, evals).to_json()
    _slow(monkeypatch)
    assert not side_of(targets[0], evals, store.conn).fractions
    slow = compare(store.conn, *targets, evals).to_json()
    assert fast == slow
    if base:
        assert sum(len(r["paired"]["judge_flips"]) for r in fast["comparisons"] if r["paired"]) > 0
    store.close()


def test_fractions_stop_holding_when_the_run_is_running_or_grows(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db", 1)
    assert fractions_valid(store.conn, BASE)
    store.finish_run(BASE, status="running")
    assert not fractions_valid(store.conn, BASE)
    store.finish_run(BASE, status="completed")
    extra = result_row(BASE, "c99", 1, service_name="svc-0", model="m0")
    store.write(Batch(results=[extra], members=[(BASE, extra["cell_key"])]))  # a resumed run grew
    assert not fractions_valid(store.conn, BASE)
    assert not side_of(Target("b@svc-0:m0", (BASE,), "svc-0", "m0"), (), store.conn).fractions
    store.close()


def test_a_digest_reads_back_as_trials() -> None:
    assert parse_digest("1:1:ab 3:0:cd") == {1: (1, "ab"), 3: (0, "cd")}
    assert parse_digest(None) == {}
