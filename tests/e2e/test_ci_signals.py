"""Signals a CI can trust, in process: gates that never pass by accident, the registry a run
really used, what a run could not measure, report permissions, ``list`` and the Python API."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from omegaconf import DictConfig

import evalhydra
from evalhydra.cli.store_commands import main
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from evalhydra.registry.definitions import default_registry_root
from evalhydra.store.db import open_store
from tests.conftest import smoke_eval, write_registry
from tests.helpers import chat_requests, mock_call, numbered_registry
from tests.reports.support import regression_store, result_row, write_run

BASE, CAND = "eval-base-aaaaaaaa", "eval-cand-bbbbbbbb"
Compose = Callable[..., DictConfig]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_empty_compare_side_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    regression_store(tmp_path / "s.db").close()
    code, _, err = _cli(capsys, "compare", "--store", str(tmp_path / "s.db"), "", "latest",
                        "--fail-on-regression")  # "$BASELINE_RUN" with the variable unset
    assert code == 2
    assert err.startswith("error: The baseline '' names no run, service or model.")


def test_evals_run_on_one_side_only_are_listed_and_left_out(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = regression_store(tmp_path / "s.db", broken=0)  # the candidate is as good on g.e
    extra = [result_row(BASE, f"x{i}", eval_id="o.only", cell_key=f"o{i}") for i in range(5)]
    write_run(store, BASE, extra)  # the baseline also ran an eval the candidate never ran
    store.close()
    args = ["compare", "--store", str(tmp_path / "s.db"), BASE, CAND]
    code, out, _ = _cli(capsys, *args, "--format", "json", "--fail-on-regression")
    doc = json.loads(out)
    assert code == 0 and doc["not_run_on"] == {"o.only": "candidate"}
    assert [r["eval_id"] for r in doc["comparisons"]] == ["g.e"]
    assert doc["overall"]["paired"]["n_cases"] == 20  # o.only's cases are not pooled
    assert doc["overall"]["baseline_pass_rate"] == 1.0
    code, out, _ = _cli(capsys, *args)
    assert "o.only: not run on the candidate; left out" in out and "-100" not in out


def test_fail_on_regression_fails_on_the_pooled_interval_too(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Two evals each slightly worse (neither significant after Holm): the pooled test is."""
    store = open_store(tmp_path / "s.db")
    for run_id, broken in ((BASE, 0), (CAND, 5)):
        rows = [result_row(run_id, f"c{i:02d}", t, passed=not (i < broken and t == 1), eval_id=e,
                           cell_key=f"{run_id}{e}{i}{t}") for e in ("g.a", "g.b") for i in range(20)
                for t in (1, 2, 3)]
        write_run(store, run_id, rows, started="2026-01-02T00:00:00.000Z" if run_id == CAND else
                  "2026-01-01T00:00:00.000Z")
    store.close()
    code, out, _ = _cli(capsys, "compare", "--store", str(tmp_path / "s.db"), BASE, CAND, "--format", "json",
                        "--fail-on-regression")
    doc = json.loads(out)
    assert all(r["paired"]["verdict"] == "no significant change" for r in doc["comparisons"])
    assert all(r["paired"]["p_holm"] >= 0.05 > r["paired"]["p_value"] for r in doc["comparisons"])
    assert doc["overall"]["paired"]["verdict"] == "regression" and code == 1


def test_a_folder_named_registry_that_is_no_registry_changes_nothing(compose: Compose,
                                                                     tmp_path: Path) -> None:
    (tmp_path / "registry" / "notes").mkdir(parents=True)  # the working directory has an unrelated folder
    assert build_plan(compose()).registry_root == default_registry_root().resolve()
    numbered_registry(tmp_path / "registry", 2)  # now it is a registry
    plan = build_plan(compose("eval=g"))
    assert plan.registry_root == (tmp_path / "registry").resolve()


def test_the_summary_names_the_registry_and_the_store(compose: Compose, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert run_plan(build_plan(compose()), output_dir=tmp_path / "out") == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (f"registry: {default_registry_root().resolve()} (the packaged example registry)"
                     f" · store: {tmp_path / 'store.db'}")


@pytest.mark.slow
def test_too_many_errors_is_exit_3_and_a_partial_outage_is_not(compose: Compose, url: str,
                                                               tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 4)
    args = [f"registry={registry}", "eval=g", "service=mock", "service.mock.enabled=false",
            f"service.base_url={url}", "run.concurrency=1"]
    mock_call(url, "config", {"fail_first_n": 3, "fail_status": 500})
    assert run_plan(build_plan(compose(*args)), output_dir=tmp_path / "a") == 3  # 3 of 4 > 0.5
    mock_call(url, "config", {"fail_first_n": 1, "fail_status": 500})
    mock_call(url, "reset", {})
    assert run_plan(build_plan(compose(*args, "run.max_error_rate=0.1")), output_dir=tmp_path / "b") == 3
    assert chat_requests(url) == 3  # the rerun re-sent the three stored errors
    mock_call(url, "reset", {})
    assert run_plan(build_plan(compose(*args, "trials=2")), output_dir=tmp_path / "c") == 0  # 1 of 8


def test_reports_get_the_permissions_of_any_new_file(compose: Compose, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        plan = build_plan(compose("report=[json,md,jsonl,text,junit]"))
        assert run_plan(plan, output_dir=tmp_path / "o") == 0
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "o").iterdir() if p.is_file()]
    assert len(files) >= 6
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o644}


def test_list_shows_every_selectable_service_and_eval(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    lines = '{"id": "1", "input": "x"}\n{"id": "2", "input": "y"}\n'
    registry = write_registry(tmp_path / "reg", evals={"g/a.json": smoke_eval("g.a", description="Alpha")},
                              data={"data/g/e/test.jsonl": lines},
                              services=[{"name": "prod", "base_url": "http://127.0.0.1:1/v1",
                                         "default_model": "m1", "timeout_ms": 100}])
    code, out, _ = _cli(capsys, "list", "--registry", str(registry), "--format", "json")
    assert code == 0
    services_doc, evals_doc = (json.loads(part.split("\n", 1)[1]) for part in out.split("\n\n")[1:3])
    services = {s["service"]: s for s in services_doc}
    assert services["prod"] == {"service": "prod", "kind": "chat", "model": "m1",
                                "endpoint": "http://127.0.0.1:1/v1", "defined in": "registry"}
    assert services["mock"]["kind"] == "mock" and services["fake_agent"]["kind"] == "agent CLI"
    evals = {e["eval"]: e for e in evals_doc}
    assert evals["g.a"]["cases"] == 2 and evals["g.a"]["description"] == "Alpha"
    assert evals["agent_cases"]["kind"] == "agent" and evals["agent_cases"]["cases"] == "invalid"  # not here
    code, out, _ = _cli(capsys, "list", "--format", "json")  # the packaged registry has the agent cases
    evals = {e["eval"]: e for e in json.loads(out.split("\n\n")[2].split("\n", 1)[1])}
    assert evals["agent_cases"]["cases"] == 3 and evals["smoke.reply_ok"]["cases"] == 2


@pytest.mark.slow
def test_evaluate_runs_like_the_command_line(tmp_path: Path) -> None:
    result = evalhydra.evaluate(["eval=smoke"], trials=2, store__path=str(tmp_path / "api.db"))
    assert result.ok and result.exit_code == 0 and result.run_id and result.run_id.startswith("eval-smoke-")
    (stat_row,) = result.stats
    assert (stat_row["eval"], stat_row["n"], stat_row["passed"], stat_row["pass_rate"]) == (
        "smoke.reply_ok", 4, 4, 1.0)
    rows = list(result.rows())
    assert len(rows) == 4 and {r["status"] for r in rows} == {"PASS"}
    never = ["eval=smoke", "matcher=regex", "matcher.pattern='^NEVER$'", "run.fail_under=0.5"]
    gated = evalhydra.evaluate(never,
                               store__path=str(tmp_path / "api.db"))
    assert not gated.ok and gated.exit_code == 1


@pytest.mark.parametrize(("overrides", "message"), [
    (["eval=smok"], "Did you mean: smoke"),  # Hydra's MissingConfigException
    (["run.concurency=4"], "concurrency"),  # Hydra's ConfigCompositionException
])
def test_evaluate_raises_the_command_lines_error_for_hydras(overrides: list[str], message: str,
                                                            tmp_path: Path) -> None:
    with pytest.raises(evalhydra.EvalHydraError, match=message):
        evalhydra.evaluate(overrides, store__path=str(tmp_path / "api.db"))


@pytest.mark.slow
def test_runs_show_each_runs_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "api.db")
    evalhydra.evaluate(["eval=smoke"], store__path=store)
    evalhydra.evaluate(["eval=smoke", "matcher=regex", "matcher.pattern='^NEVER$'", "run.fail_under=0.5"],
                       store__path=store)
    evalhydra.evaluate(["eval=smoke", "run.fail_under=0.5", "trials=2"], store__path=store)
    evalhydra.evaluate(["eval=smoke", "+run.fail_under_per_eval.smoke=0.5", "trials=3"], store__path=store)
    capsys.readouterr()
    code, out, _ = _cli(capsys, "runs", "--store", store, "--format", "json")
    # "passed" only where a gate was set and held; a run without one says so (issue 48, item 6)
    assert code == 0 and sorted(r["verdict"] for r in json.loads(out)) == [
        "gate failed", "no gate", "passed", "passed"]


def test_rejudge_from_python_scores_a_run_again_as_a_new_run(tmp_path: Path) -> None:
    store = tmp_path / "api.db"
    first = evalhydra.evaluate(["eval=smoke"], trials=2, store__path=str(store))
    again = evalhydra.rejudge(first.run_id or "", ["matcher=regex", "matcher.pattern='^NEVER$'",
                                                   "run.fail_under=0.5"], store=store, out=tmp_path / "out")
    assert again.run_id and again.run_id != first.run_id and again.run_id.startswith("eval-rejudge")
    assert (again.exit_code, again.ok, again.store_path) == (1, False, store.resolve())
    assert [r["status"] for r in again.rows()] == ["FAIL"] * 4  # the stored outputs, scored anew
    with pytest.raises(evalhydra.EvalHydraError, match="nope"):
        evalhydra.rejudge("nope", store=store)


def test_evaluate_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    async def in_asyncio() -> evalhydra.EvalResult:
        return evalhydra.evaluate(["eval=smoke"], store__path=str(tmp_path / "a.db"))

    async def in_trio() -> evalhydra.EvalResult:
        return evalhydra.evaluate(["eval=smoke"], store__path=str(tmp_path / "t.db"))

    assert asyncio.run(in_asyncio()).ok  # a Jupyter cell runs inside an asyncio loop
    assert trio.run(in_trio).ok


def test_a_401_with_the_key_variable_unset_names_the_fix(compose: Compose, url: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALHYDRA_TEST_KEY", raising=False)
    mock_call(url, "config", {"fail_rate": 1, "fail_status": 401})
    plan = build_plan(compose("service=mock", "service.mock.enabled=false", f"service.base_url={url}",
                              "service.api_key_env=EVALHYDRA_TEST_KEY"))
    assert run_plan(plan, output_dir=tmp_path / "out") == 3
    out = capsys.readouterr().out
    assert ("fix: service 'mock': 2 cells got 401 Unauthorized and $EVALHYDRA_TEST_KEY is not set "
            "(nor in a .env); export EVALHYDRA_TEST_KEY=<key> or add it to the project's .env.") in out
