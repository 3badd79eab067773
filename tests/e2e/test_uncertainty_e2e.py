"""Uncertainty end to end: the mock answers each case with a known probability.

Each case says "Reply OK with probability p." and the mock draws from its
seeded generator, so a run's per-case pass probabilities are known. One request
at a time keeps the draws in order, so every run here is reproducible.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import evalhydra
from evalhydra.cli.store_commands import main
from evalhydra.stats.rates import wilson_interval
from tests.conftest import smoke_eval, write_registry

CASES = 30


def _probabilities(seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.betavariate(0.5, 0.5) for _ in range(CASES)]


def _registry(root: Path, probabilities: list[float], digits: int) -> Path:
    lines = "".join(json.dumps({"id": f"c{i:02d}", "input": f"Reply OK with probability {p:.{digits}f}.",
                                "ideal": "OK"}) + "\n" for i, p in enumerate(probabilities))
    return write_registry(root, evals={"g/e.json": smoke_eval("g.e")}, data={"data/g/e/test.jsonl": lines})


def _run(tmp_path: Path, name: str, probabilities: list[float], *extra: str,
         digits: int = 4) -> evalhydra.EvalResult:
    """One run into the shared store. The same probabilities written with other ``digits`` make
    other prompts, so a second model "as good" is sent afresh instead of resumed from the store."""
    registry = _registry(tmp_path / name, probabilities, digits)
    return evalhydra.evaluate([f"registry={registry}", "eval=g.e", f"store.path={tmp_path / 's.db'}",
                               "run.concurrency=1", "report=[json]", *extra])


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()  # the runs' own summaries
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_repeated_trials_give_a_case_clustered_interval(tmp_path: Path) -> None:
    probabilities = _probabilities(1)
    result = _run(tmp_path, "a", probabilities, "trials=8", "service.mock.seed=1")
    (stat,) = result.stats
    assert (stat["ci_method"], stat["n_cases"], stat["n"]) == ("case-clustered wilson", CASES, 240)
    assert stat["ci_low"] <= sum(probabilities) / CASES <= stat["ci_high"]
    naive = wilson_interval(stat["passed"], stat["scored"])
    assert stat["ci_high"] - stat["ci_low"] > 1.5 * (naive[1] - naive[0])  # 30 cases, not 240 coins
    assert stat["ci_high"] - stat["ci_low"] <= 0.40


def test_one_trial_keeps_wilson_over_the_results(tmp_path: Path) -> None:
    (stat,) = _run(tmp_path, "a", _probabilities(2), "trials=1").stats
    assert stat["ci_method"] == "wilson"
    assert (stat["ci_low"], stat["ci_high"]) == wilson_interval(stat["passed"], stat["scored"])


@pytest.mark.slow
def test_compare_gates_a_real_drop_and_not_an_equal_model(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    probabilities = _probabilities(3)
    base = _run(tmp_path, "base", probabilities, "trials=5", "service.mock.seed=1")
    same = _run(tmp_path, "same", probabilities, "trials=5", "service.mock.seed=2", digits=5)
    worse = _run(tmp_path, "worse", [max(0.0, p - 0.3) for p in probabilities], "trials=5",
                 "service.mock.seed=3")
    store = ["--store", str(tmp_path / "s.db")]
    assert base.run_id and same.run_id and worse.run_id
    code, out, _ = _cli(capsys, "compare", *store, base.run_id, worse.run_id, "--fail-on-regression")
    assert code == 1 and "REGRESSION" in out
    code, out, _ = _cli(capsys, "compare", *store, base.run_id, same.run_id, "--fail-on-regression",
                        "--format", "json")
    paired = json.loads(out)["overall"]["paired"]
    assert code == 0 and paired["verdict"] == "no significant change"
    assert paired["method"] == "case-clustered paired t"
    assert (paired["n_cases"], paired["trials_max"]) == (CASES, 5)
    assert paired["ci_low"] < 0 < paired["ci_high"]


@pytest.mark.slow
def test_a_total_collapse_fails_the_gate_and_four_cases_say_they_cannot_tell(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """5 cases × 5 trials from 100 % to 0 % is a regression (exit 1); with 4 cases no result can be
    significant, and the comparison says so instead of printing a drop it could detect."""
    store = ["--store", str(tmp_path / "s.db")]
    runs = {name: _run(tmp_path, name, [p] * n, "trials=5", digits=d).run_id
            for name, p, n, d in (("good", 1.0, 5, 4), ("gone", 0.0, 5, 5), ("good4", 1.0, 4, 6),
                                  ("gone4", 0.0, 4, 7))}
    code, out, _ = _cli(capsys, "compare", *store, runs["good"], runs["gone"], "--fail-on-regression")
    assert code == 1 and "verdict: REGRESSION" in out and "underpowered" not in out, out
    code, out, _ = _cli(capsys, "compare", *store, runs["good4"], runs["gone4"], "--fail-on-regression",
                        "--format", "json")
    paired = json.loads(out)["overall"]["paired"]
    assert code == 0 and paired["verdict"] == "cannot reach p < 0.05 with 4 cases"
    assert paired["p_value"] == 1 / 16 and json.loads(out)["precision"]["reachable"] is False
    code, out, _ = _cli(capsys, "compare", *store, runs["good4"], runs["gone4"])
    assert "cannot reach p < 0.05 with 4 shared case(s)" in out and "detects (80% power)" not in out
    assert "verdict: cannot tell: cannot reach p < 0.05 with 4 cases" in out


def test_compare_says_when_it_is_underpowered_and_power_says_how_many_cases(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    probabilities = _probabilities(4)
    base = _run(tmp_path, "base", probabilities, "trials=3", "service.mock.seed=1")
    cand = _run(tmp_path, "cand", probabilities, "trials=3", "service.mock.seed=2", digits=5)
    store = ["--store", str(tmp_path / "s.db")]
    assert base.run_id and cand.run_id
    code, out, _ = _cli(capsys, "compare", *store, base.run_id, cand.run_id)
    assert code == 0 and "underpowered: with 30 cases × 3 trial(s)" in out and "cases at 3 trial(s)" in out
    code, out, _ = _cli(capsys, "compare", *store, base.run_id, cand.run_id, "--min-detectable", "0.6")
    assert "underpowered" not in out  # a 60-point drop is visible with 30 cases
    code, out, _ = _cli(capsys, "power", *store, base.run_id, cand.run_id, "--format", "json")
    doc = json.loads(out)
    needed = {row["trials"]: row["cases"] for row in doc["rows"]}
    assert code == 0 and doc["source"].startswith("observed on 30 shared cases")
    assert needed[1] >= needed[3] >= needed[10] > CASES  # 5 points needs more than 30 cases
    assert doc["now"]["min_detectable"] > 0.05
    code, out, _ = _cli(capsys, "power", *store, base.run_id)
    assert code == 0 and "one target of 30 cases" in out and "cases needed" in out
    code, _, err = _cli(capsys, "power", *store, base.run_id, cand.run_id, base.run_id)
    assert code == 2 and err.startswith("error: power takes at most two targets")


def test_the_pass_hat_k_gate_fails_an_inconsistent_suite(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    flaky = _run(tmp_path, "a", [0.9] * 5, "trials=4", "run.fail_under_pass_hat_k=0.95")
    (stat,) = flaky.stats
    assert flaky.exit_code == 1 and stat["k"] == 4 and stat["pass_hat_k"] < 0.95
    assert f"pass^4 {stat['pass_hat_k']:.1%} < 95.0%" in capsys.readouterr().err
    steady = _run(tmp_path, "b", [1.0] * 5, "trials=4", "run.fail_under_pass_hat_k=0.95", "run.pass_hat_k=2")
    assert steady.exit_code == 0 and steady.stats[0]["k"] == 2 and steady.stats[0]["pass_hat_k"] == 1.0


def test_compare_lists_verdicts_that_flipped_on_the_same_output(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Re-judging "not OK" with includes instead of exact_match flips the verdict, not the output."""
    first = _run(tmp_path, "a", [0.5] * 6, "trials=2")
    assert first.run_id
    again = evalhydra.rejudge(first.run_id, ["matcher=includes"], store=tmp_path / "s.db",
                              out=tmp_path / "again")
    assert again.run_id
    code, out, _ = _cli(capsys, "compare", "--store", str(tmp_path / "s.db"), first.run_id, again.run_id,
                        "--format", "json")
    paired = json.loads(out)["overall"]["paired"]
    failed = 12 - first.stats[0]["passed"]
    assert code == 0 and failed > 0 and len(paired["judge_flips"]) == failed
    assert all(flip.startswith("g.e/c0") and "#" in flip for flip in paired["judge_flips"])
