"""Issue 52, items 4–6 end to end: the mock as a judge with known error rates (sensitivity 0.85,
specificity 0.75) scores 400 outputs whose true pass rate is 0.30; 100 labelled outputs calibrate
it. The summary, ``calibrate`` and ``evaluate().stats`` show the raw rate (about 0.43, its interval
far from 0.30) and the corrected one covering 0.30; the judge gates fail and pass on their
thresholds; and a rejudge by another judge, which looks like a significant regression, is "not
significant after judge correction"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalhydra.api import evaluate
from evalhydra.store.db import immediate, open_store
from evalhydra.store.labels import import_labels
from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

pytestmark = pytest.mark.slow

TRUE_PASSES = 120  # of 400 cases: the true pass rate is 0.30
NOISY = ("service.mock.judge_sensitivity=0.85", "service.mock.judge_specificity=0.75")


def _registry(root: Path) -> Path:
    lines = "".join(json.dumps({"id": f"c{i:03d}", "input": f"Reply with exactly V{i}.",
                                "ideal": f"V{i}" if i < TRUE_PASSES else "NOPE"}) + "\n" for i in range(400))
    grade = smoke_eval(matcher={"kind": "model_grade", "judge_service": "mock", "rubric": "Right?",
                                "pass_score": 1.0})
    return write_registry(root, evals={"g/e.json": grade}, data={"data/g/e/test.jsonl": lines})


def _run(tmp_path: Path, *extra: str):  # type: ignore[no-untyped-def]
    # one request at a time: the mock's seeded draws then fall on the same cases every run
    return evaluate([f"registry={_registry(tmp_path / 'reg')}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                     "run.concurrency=1", *NOISY, *extra])


def _label_every_fourth_case(store_path: Path) -> None:
    store = open_store(store_path)
    with immediate(store.conn):
        import_labels(store.conn, [(f"row {i}", {"eval": "g.e", "case": f"c{i:03d}",
                                                 "label": "PASS" if i < TRUE_PASSES else "FAIL"})
                                   for i in range(0, 400, 4)], "ana")
    store.close()


def test_a_noisy_judge_corrected_gated_and_compared(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first.exit_code == 0, first
    (raw,) = first.stats
    assert "corrected_pass_rate" not in raw  # nothing labelled yet
    assert raw["ci_low"] > 0.35  # the raw interval is far from the true 0.30
    _label_every_fourth_case(tmp_path / "s.db")

    again = _run(tmp_path)  # every cell resumed; the summary now reads the labels
    (stat,) = again.stats
    assert stat["pass_rate"] == raw["pass_rate"] and stat["judge_labels"] == 100
    assert stat["corrected_ci_low"] <= 0.30 <= stat["corrected_ci_high"]
    assert abs(stat["corrected_pass_rate"] - 0.30) < abs(stat["pass_rate"] - 0.30) / 2
    assert stat["corrected_ci_method"].startswith("Rogan-Gladen")

    shown = run_cli("calibrate", "--store", str(tmp_path / "s.db"), "--format", "json", cwd=tmp_path)
    (doc,) = json.loads(shown.stdout)
    assert len(doc["judge_settings"]) == 12  # the run kept its matcher's fingerprint
    found = doc["agreement"]
    assert found["sensitivity_ci"][0] <= 0.85 <= found["sensitivity_ci"][1]
    assert found["specificity_ci"][0] <= 0.75 <= found["specificity_ci"][1]
    assert doc["targets"][0]["corrected_pass_rate"] == pytest.approx(stat["corrected_pass_rate"])

    kappa = stat["judge_kappa"]
    assert _run(tmp_path, "run.require_judge_labels=101").exit_code == 1
    assert _run(tmp_path, f"run.min_judge_kappa={kappa + 0.01:.3f}").exit_code == 1
    passing = _run(tmp_path, "run.require_judge_labels=100", f"run.min_judge_kappa={kappa - 0.01:.3f}")
    assert passing.exit_code == 0

    gated = run_cli(f"registry={tmp_path / 'reg'}", "eval=g.e", f"store.path={tmp_path / 's.db'}", *NOISY,
                    "run.concurrency=1", "run.progress=false", "run.require_judge_labels=200", cwd=tmp_path)
    assert gated.returncode == 1
    assert "judge-corrected pass rates" in gated.stdout
    assert "judge labels (mock/mock-model) 100 < 200" in gated.stderr

    rejudged = run_cli("rejudge", first.run_id, "judge_service=mock_judge", "--store", str(tmp_path / "s.db"),
                       cwd=tmp_path)
    assert rejudged.returncode == 0, rejudged.stderr
    store = open_store(tmp_path / "s.db", read_only=True)
    (candidate,) = [r[0] for r in store.conn.execute("select run_id from runs where parent_run_id = ?",
                                                       [first.run_id])]
    store.close()
    compare = ("compare", first.run_id, candidate, "--store", str(tmp_path / "s.db"), "--fail-on-regression")
    plain = run_cli(*compare, cwd=tmp_path)
    assert plain.returncode == 1 and "REGRESSION" in plain.stdout  # the stricter judge alone
    corrected = run_cli(*compare, "--judge-corrected", cwd=tmp_path)
    assert corrected.returncode == 0, corrected.stdout + corrected.stderr
    assert "not significant after judge correction" in corrected.stdout
    as_json = json.loads(run_cli(*compare[:-1], "--judge-corrected", "--format", "json", cwd=tmp_path).stdout)
    block = as_json["comparisons"][0]["judge_corrected"]
    assert block["verdict"] == "no significant change" and block["ci_low"] < 0 < block["ci_high"]
    assert (block["baseline_judge"], block["candidate_judge"]) == ("mock/mock-model", "mock_judge/mock-judge")
