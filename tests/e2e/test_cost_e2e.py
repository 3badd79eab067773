"""Issue 3 item 10 end to end: cost per result, the spend cap and the dry run, against a mock process."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import ChatRequest
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from evalhydra.services.mock.replies import reply_for, usage_for
from evalhydra.services.openai import build_payload
from tests.conftest import smoke_eval, write_registry
from tests.helpers import chat_requests, mock_call, numbered_registry, query_rows, run_cli

GEN_PRICES = ["service.pricing.input_per_mtok=2.0", "service.pricing.output_per_mtok=8.0"]
JUDGE_PRICING = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}


def rows(db: Path, sql: str) -> list[dict[str, Any]]:
    return query_rows(db, sql)


def plan_for(compose: Callable[..., DictConfig], registry: Path, url: str, *extra: str) -> Any:
    overrides = [f"registry={registry}", "service=mock", "service.mock.enabled=false",
                 f"service.base_url={url}", "eval=g", *extra]
    return build_plan(compose(*overrides), overrides)


def graded_registry(root: Path, url: str, n: int = 3) -> Path:
    """n cases graded by a registry judge service with its own pricing, on the same mock."""
    lines = "".join(json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}.", "ideal": f"V{i}"}) + "\n"
                    for i in range(n))
    matcher = {"kind": "model_grade", "judge_service": "judge", "rubric": "The answer names the value."}
    judge = {"name": "judge", "base_url": url, "default_model": "judge-model", "timeout_ms": 5000,
             "pricing": JUDGE_PRICING}
    return write_registry(root, evals={"g/e.json": smoke_eval("g.e", matcher=matcher)},
                          data={"data/g/e/test.jsonl": lines}, services=[judge])


def test_generation_and_judge_costs_are_stored_apart(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    registry = graded_registry(tmp_path / "reg", url)
    assert run_plan(plan_for(compose, registry, url, *GEN_PRICES), output_dir=tmp_path / "out") == 0
    capsys.readouterr()
    db = tmp_path / "store.db"
    results = rows(db, "select * from results order by case_id")
    assert [r["status"] for r in results] == ["PASS"] * 3 and all(r["judge_model"] == "judge-model"
                                                                  for r in results)
    for i, r in enumerate(results):
        # the generation's usage is the mock's for exactly the payload evalhydra sends
        payload = build_payload(ServiceConfig(name="mock"), ChatRequest(f"Reply with exactly V{i}."))
        usage = usage_for(payload, reply_for(payload))
        assert (r["prompt_tokens"], r["completion_tokens"]) == (
            usage["prompt_tokens"], usage["completion_tokens"])
        assert r["cost_usd"] == pytest.approx((r["prompt_tokens"] * 2.0 + r["completion_tokens"] * 8.0) / 1e6)
        assert r["judge_prompt_tokens"] > r["prompt_tokens"] and r["judge_completion_tokens"] > 0
        assert r["judge_cost_usd"] == pytest.approx(
            (r["judge_prompt_tokens"] * 3.0 + r["judge_completion_tokens"] * 15.0) / 1e6)
        assert r["cost_usd"] > 0 and r["judge_cost_usd"] > r["cost_usd"]
    calls = rows(db, "select call, count(*) as n from attempts group by call order by call")
    assert calls == [{"call": "candidate", "n": 3}, {"call": "judge", "n": 3}]
    total = sum(r["cost_usd"] + r["judge_cost_usd"] for r in results)
    (stats,) = rows(db, "select cost_usd from run_eval_stats")
    assert stats["cost_usd"] == pytest.approx(total, abs=1e-6)
    assert report_column(tmp_path / "out" / "report.md", "Cost USD") == [pytest.approx(total, abs=5e-5)]


def report_column(path: Path, name: str) -> list[float]:
    """The numbers in one column of report.md's results table."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|") and f" {name} " in line)
    index = [cell.strip() for cell in lines[start].strip("|").split("|")].index(name)
    values = []
    for line in lines[start + 2:]:  # past the header and its |---| rule, to the table's end
        if not line.startswith("|"):
            break
        values.append(float(line.strip("|").split("|")[index]))
    return values


def test_unpriced_service_costs_nothing(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    registry = numbered_registry(tmp_path / "reg", 2)
    assert run_plan(plan_for(compose, registry, url), output_dir=tmp_path / "out") == 0
    assert rows(tmp_path / "store.db", "select cost_usd, judge_cost_usd from results") == [
        {"cost_usd": 0.0, "judge_cost_usd": None}] * 2


# Each cell: 7 tokens ("Reply with exactly Vn." → 6 prompt + 1 completion) at $1000/Mtok = $0.007.
CAPPED = ["service.pricing.input_per_mtok=1000", "service.pricing.output_per_mtok=1000",
          "run.max_cost_usd=0.025"]
CELL_COST = 0.007


@pytest.mark.parametrize("concurrency", [1, 4])
def test_max_cost_stops_scheduling_and_stores_in_flight_cells(
    concurrency: int, url: str, tmp_path: Path, compose: Callable[..., DictConfig],
    capsys: pytest.CaptureFixture[str],
) -> None:
    registry = numbered_registry(tmp_path / "reg", 30)
    mock_call(url, "config", {"latency_ms": 20})
    plan = plan_for(compose, registry, url, *CAPPED, f"run.concurrency={concurrency}")
    assert run_plan(plan, output_dir=tmp_path / "out") == 0  # a spent budget is not a failure
    err = capsys.readouterr().err
    assert "stopped scheduling: run.max_cost_usd=0.025 reached." in err
    db = tmp_path / "store.db"
    stored = rows(db, "select count(*) as n, sum(cost_usd) as spent, min(cost_usd) as low from results")[0]
    assert stored["low"] == pytest.approx(CELL_COST)
    assert 4 <= stored["n"] < 30 and stored["spent"] >= 0.025
    assert chat_requests(url) == stored["n"]  # every started cell finished and was stored
    assert rows(db, "select count(*) as n from run_cells") == [{"n": stored["n"]}]
    assert rows(db, "select status from runs") == [{"status": "completed"}]

    mock_call(url, "reset", {})  # raising the cap resumes: only the unstored cells run
    again = plan_for(compose, registry, url, *CAPPED[:2], "run.max_cost_usd=100")
    assert run_plan(again, output_dir=tmp_path / "again") == 0
    assert chat_requests(url) == 30 - stored["n"]
    assert rows(db, "select count(*) as n from results") == [{"n": 30}]


def test_no_cell_starts_once_the_budget_is_spent(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    registry = numbered_registry(tmp_path / "reg", 30)
    plan = plan_for(compose, registry, url, *CAPPED, "run.concurrency=1")
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    # serial cells: 3 × $0.007 < $0.025 ≤ 4 × $0.007, so exactly 4 cells may start
    assert rows(tmp_path / "store.db", "select count(*) as n from results") == [{"n": 4}]


def test_dry_run_prints_the_plan_and_makes_no_call(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    lines = json.dumps({"id": "c1", "input": "Reply with exactly A.", "ideal": "A"}) + "\n"
    registry = write_registry(
        tmp_path / "reg",
        evals={"g/a.json": smoke_eval("g.a", "data/g/a/test.jsonl", default_run_count=3),
               "g/b.json": smoke_eval("g.b", "data/g/b/test.jsonl")},
        data={"data/g/a/test.jsonl": lines * 1, "data/g/b/test.jsonl": lines.replace("c1", "c2") + lines})
    plan = plan_for(compose, registry, url, *GEN_PRICES, "run.dry_run=true", "service.model=gpt-dry")
    assert run_plan(plan, output_dir=tmp_path / "out") == 0
    out = capsys.readouterr().out
    table = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("g.")}
    # eval, service, model, cases, trials, cells, est. tokens, est. cost
    assert table["g.a"][1:6] == ["mock", "gpt-dry", "1", "3", "3"]
    assert table["g.b"][1:6] == ["mock", "gpt-dry", "2", "1", "2"]
    assert all(int(row[6]) > 0 and re.fullmatch(r"\$\d+\.\d{4}", row[7]) for row in table.values())
    summary = re.search(r"dry run: 5 cells would be sent \(0 already stored\), estimated cost "
                        r"\$(\d+\.\d+); no call was made\.", out)
    assert summary and float(summary.group(1)) > 0
    assert chat_requests(url) == 0
    assert not (tmp_path / "store.db").exists() and not (tmp_path / "out").exists()


def test_dry_run_counts_only_the_cells_it_would_send(
    url: str, tmp_path: Path, compose: Callable[..., DictConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    registry = numbered_registry(tmp_path / "reg", 3)
    args = [f"registry={registry}", "service=mock", "service.mock.enabled=false", f"service.base_url={url}",
            "eval=g", f"store.path={tmp_path / 'store.db'}", "run.progress=false"]
    assert run_plan(build_plan(compose(*args, "trials=2")), output_dir=tmp_path / "out") == 0
    capsys.readouterr()
    assert run_plan(build_plan(compose(*args, "trials=3", "run.dry_run=true"))) == 0
    out = capsys.readouterr().out
    assert "dry run: 3 cells would be sent (6 already stored)" in out
    assert chat_requests(url) == 6  # the first run's, none from the dry run


@pytest.mark.slow
def test_dry_run_sweep_prints_each_model_and_makes_no_call(url: str, tmp_path: Path) -> None:
    registry = numbered_registry(tmp_path / "reg", 4)
    res = run_cli("-m", f"registry={registry}", "service=mock", "service.mock.enabled=false",
                  f"service.base_url={url}", "eval=g", "service.model=m-one,m-two", "run.dry_run=true",
                  *GEN_PRICES, "store.path=s.db", "run.progress=false", "hydra.sweep.dir=multi", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    planned = [line.split()[:6] for line in res.stdout.splitlines() if line.startswith("g.e ")]
    assert planned == [["g.e", "mock", "m-one", "4", "1", "4"], ["g.e", "mock", "m-two", "4", "1", "4"]]
    assert res.stdout.count("no call was made") == 2
    assert chat_requests(url) == 0 and not (tmp_path / "s.db").exists()
