"""Agent-CLI evals through the whole pipeline: config → runner → store → reports, with resume."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from evalhydra.registry.definitions import default_registry_root

Compose = Callable[..., DictConfig]


@pytest.fixture
def agent_registry(tmp_path: Path) -> Path:
    """The packaged agent cases plus one whose agent exits non-zero."""
    root = tmp_path / "reg"
    shutil.copytree(default_registry_root() / "agent_cases", root / "agent_cases")
    crash = root / "agent_cases" / "crash"
    shutil.copytree(root / "agent_cases" / "hello-file", crash)
    (crash / "instruction.txt").write_text("SAY starting\nEXIT 3\n")
    (root / "services.json").write_text("[]")
    return root


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.slow
def test_agent_run_resume_and_retry_errors(compose: Compose, agent_registry: Path, tmp_path: Path) -> None:
    overrides = [
        f"registry={agent_registry}",
        "service=fake_agent",
        "eval=agent_cases",
        "trials=2",
        f"run.agent_trials_dir={tmp_path / 'trials'}",
    ]
    db = tmp_path / "store.db"
    assert run_plan(build_plan(compose(*overrides)), output_dir=tmp_path / "out1") == 0
    statuses = dict(_rows(db, "select case_id || '/' || run_index, status from results"))
    assert statuses == {
        "count-todos/1": "EXCELLENT",
        "count-todos/2": "EXCELLENT",
        "crash/1": "ERROR",
        "crash/2": "ERROR",
        "fix-bug/1": "EXCELLENT",
        "fix-bug/2": "EXCELLENT",
        "hello-file/1": "EXCELLENT",
        "hello-file/2": "EXCELLENT",
    }
    crash = _rows(
        db, "select exit_code, error_kind, failure_reason, kind from results where case_id = 'crash'"
    )
    assert crash[0] == (3, "agent_error", "exit code 3", "agent")
    trial = tmp_path / "trials" / "fake_agent" / "fake_model-1" / "hello-file" / "trial-1"
    assert sorted(p.name for p in trial.iterdir()) == ["history", "notes", "stdout.log", "workdir"]
    assert (trial / "workdir" / "hello.txt").read_text().strip() == "hello, world"
    history = json.loads(next((trial / "history").glob("*.json")).read_text())
    assert history, "the agent wrote its session history where ZRB_LLM_HISTORY_DIR pointed"
    tokens = _rows(
        db, "select prompt_tokens, completion_tokens, cost_usd from results where case_id = 'hello-file'"
    )
    assert all(t[0] > 0 and t[1] > 0 and t[2] > 0 for t in tokens)

    (trial / "workdir" / "marker").write_text("untouched")
    assert run_plan(build_plan(compose(*overrides)), output_dir=tmp_path / "out2") == 0
    assert (trial / "workdir" / "marker").exists(), "a stored cell is not run again"
    assert _rows(db, "select count(*) from results") == [(8,)]
    assert _rows(db, "select cells_run from runs order by started_at desc limit 1") == [(0,)]

    assert (
        run_plan(build_plan(compose(*overrides, "run.retry_errors=true")), output_dir=tmp_path / "out3") == 0
    )
    assert _rows(db, "select cells_run from runs order by started_at desc limit 1") == [(2,)]
    # the two errored cells were sent again: each has a second version, the first run's stays
    assert _rows(db, "select count(*), count(distinct cell_key) from results") == [(10, 8)]


def test_agent_eval_needs_a_command_service(compose: Compose) -> None:
    from evalhydra.core.errors import EvalHydraError

    with pytest.raises(EvalHydraError, match="service=fake_agent"):
        build_plan(compose("eval=agent_cases"))
    with pytest.raises(EvalHydraError, match="eval=agent_cases"):
        build_plan(compose("service=fake_agent", "eval=smoke"))


def test_zrb_template_requires_provider_model(compose: Compose) -> None:
    from evalhydra.core.errors import EvalHydraError

    with pytest.raises(EvalHydraError, match="provider:name"):
        build_plan(compose("service=zrb", "eval=agent_cases", "service.model=gpt-4o"))
    with pytest.raises(EvalHydraError, match="service.timeout_s"):
        build_plan(compose("service=zrb", "eval=agent_cases", "service.timeout_s=5"))
