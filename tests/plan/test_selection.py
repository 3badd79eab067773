"""Running a few cases: run.limit, run.cases, run.tags, run.shuffle with run.seed, run.rerun=failed.

A selection changes which cells are sent, never a cell's identity: a later full run reuses every
cell a selected run finished.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from evalhydra.core.errors import EvalHydraError
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import planned_cells
from tests.conftest import smoke_eval, write_registry
from tests.helpers import chat_requests, mock_process, run_cli

Compose = Callable[..., DictConfig]


def _registry(root: Path, n: int = 10) -> Path:
    """Cases c0..c9; even ones tagged 'even'; c3 and c7 answered wrongly by the mock."""
    lines = []
    for i in range(n):
        wrong = i in (3, 7)
        lines.append(
            json.dumps(
                {
                    "id": f"c{i}",
                    "input": f"Reply with exactly V{i}.",
                    "ideal": f"X{i}" if wrong else f"V{i}",
                    "tags": ["even"] if i % 2 == 0 else [],
                }
            )
        )
    return write_registry(
        root, evals={"g/e.json": smoke_eval()}, data={"data/g/e/test.jsonl": "\n".join(lines)}
    )


def _case_ids(compose: Compose, registry: Path, *overrides: str) -> list[str]:
    plan = build_plan(compose(f"registry={registry}", "eval=g.e", *overrides))
    return [job.case.id for job in planned_cells(plan) if job.trial == 1]


def test_limit_ids_globs_and_tags_select_cases(compose: Compose, tmp_path: Path) -> None:
    reg = _registry(tmp_path / "reg")
    assert _case_ids(compose, reg, "run.limit=3") == ["c0", "c1", "c2"]
    assert _case_ids(compose, reg, "run.limit=0.25") == ["c0", "c1", "c2"]  # ceil(0.25 × 10)
    assert _case_ids(compose, reg, "run.cases=[c1,c8*]") == ["c1", "c8"]
    assert _case_ids(compose, reg, "run.tags=[even]", "run.limit=2") == ["c0", "c2"]


def test_shuffle_is_a_seeded_sample_and_keys_do_not_change(compose: Compose, tmp_path: Path) -> None:
    reg = _registry(tmp_path / "reg")
    first = _case_ids(compose, reg, "run.shuffle=true", "run.seed=7", "run.limit=4")
    assert first == _case_ids(compose, reg, "run.shuffle=true", "run.seed=7", "run.limit=4")
    assert first != _case_ids(compose, reg, "run.shuffle=true", "run.seed=8", "run.limit=4")
    assert len(set(first)) == 4 and first != ["c0", "c1", "c2", "c3"]
    full = {job.case.id: job.key for job in planned_cells(build_plan(compose(f"registry={reg}", "eval=g.e")))}
    sample = planned_cells(
        build_plan(compose(f"registry={reg}", "eval=g.e", "run.shuffle=true", "run.limit=4"))
    )
    assert all(full[job.case.id] == job.key for job in sample)  # a selection is no part of a cell's key


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("run.limit=0", r"run\.limit=0: must be a whole number"),
        ("run.limit=2.5", r"run\.limit=2\.5: must be a whole number"),
        ("run.rerun=errors", r"run\.rerun=errors: unknown"),
    ],
)
def test_a_bad_selection_is_refused(compose: Compose, tmp_path: Path, override: str, message: str) -> None:
    with pytest.raises(EvalHydraError, match=message):
        build_plan(compose(f"registry={_registry(tmp_path / 'reg')}", "eval=g.e", override))


@pytest.mark.slow
def test_limit_sends_limit_times_trials_then_a_full_run_reuses_them(tmp_path: Path) -> None:
    reg = _registry(tmp_path / "reg")
    with mock_process() as url:
        common = (
            f"registry={reg}",
            "eval=g.e",
            "trials=2",
            "service.mock.enabled=false",
            f"service.base_url={url}",
            "run.progress=false",
        )
        limited = run_cli(*common, "run.limit=3", "hydra.run.dir=outputs/runs/limited", cwd=tmp_path)
        assert limited.returncode == 0, limited.stderr
        assert chat_requests(url) == 3 * 2
        assert "selection: limit=3" in limited.stdout
        full = run_cli(*common, "hydra.run.dir=outputs/runs/full", cwd=tmp_path)
        assert full.returncode == 0, full.stderr
        assert chat_requests(url) == 10 * 2  # the 6 finished cells were reused, 14 sent
        assert "6 resumed from the store" in full.stdout
    runs = tmp_path / "outputs" / "runs"
    assert "**Selection**" in (runs / "limited" / "report.md").read_text()
    assert "**Selection**" not in (runs / "full" / "report.md").read_text()


@pytest.mark.slow
def test_rerun_failed_runs_exactly_the_failed_cases(tmp_path: Path) -> None:
    reg = _registry(tmp_path / "reg")
    store = tmp_path / "outputs" / "evalhydra.db"
    first = run_cli(f"registry={reg}", "eval=g.e", "run.progress=false", cwd=tmp_path)
    assert first.returncode == 0 and "2 failed" in first.stdout
    again = run_cli(
        f"registry={reg}",
        "eval=g.e",
        "run.rerun=failed",
        "service.system_prompt=Be brief.",
        "run.progress=false",
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr
    assert "selection: rerun=failed" in again.stdout
    conn = sqlite3.connect(store)
    run_id = conn.execute("select run_id from runs order by started_at desc limit 1").fetchone()[0]
    cases = {
        row[0]
        for row in conn.execute(
            "select r.case_id from run_cells rc join results r using (cell_key) where rc.run_id = ?",
            (run_id,),
        )
    }
    assert cases == {"c3", "c7"}


@pytest.mark.slow
def test_rerun_failed_with_nothing_failed_or_no_earlier_run(tmp_path: Path) -> None:
    reg = write_registry(
        tmp_path / "reg",
        evals={"g/e.json": smoke_eval()},
        data={"data/g/e/test.jsonl": '{"id": "a", "input": "Reply with exactly A.", "ideal": "A"}'},
    )
    never = run_cli(f"registry={reg}", "eval=g.e", "run.rerun=failed", cwd=tmp_path)
    assert never.returncode == 2 and never.stderr.startswith("error: run.rerun=failed:"), never.stderr
    assert run_cli(f"registry={reg}", "eval=g.e", "run.progress=false", cwd=tmp_path).returncode == 0
    nothing = run_cli(f"registry={reg}", "eval=g.e", "run.rerun=failed", cwd=tmp_path)
    assert nothing.returncode == 0 and "nothing to rerun" in nothing.stdout
    typo = run_cli(f"registry={reg}", "eval=g.e", "run.cases=[zz*]", cwd=tmp_path)
    assert typo.returncode == 2 and "matches no case" in typo.stderr
