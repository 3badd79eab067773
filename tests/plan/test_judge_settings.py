"""Issue 58, item 8: a judge's own settings are set on the judge, and a mock setting on a service
that is not the mock is refused, naming where it belongs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import evalhydra
from evalhydra.core.errors import EvalHydraError
from tests.conftest import smoke_eval, write_registry
from tests.helpers import run_cli

CASES = 4


def _registry(root: Path, judge: str) -> Path:
    lines = "".join(json.dumps({"id": f"c{i}", "input": f"Reply with exactly V{i}.", "ideal": f"V{i}"}) + "\n"
                    for i in range(CASES))
    grade = smoke_eval(matcher={"kind": "model_grade", "judge_service": judge, "rubric": "Right?",
                                "pass_score": 1.0})
    return write_registry(root, evals={"g/e.json": grade}, data={"data/g/e/test.jsonl": lines})


def test_a_mock_setting_on_a_service_that_is_not_the_mock_names_where_it_belongs(tmp_path: Path) -> None:
    done = run_cli(f"registry={_registry(tmp_path / 'reg', 'mock_judge')}", "eval=g.e",
                   "service.mock.enabled=false", "service.base_url=http://127.0.0.1:9/v1",
                   "service.mock.judge_sensitivity=0.85", f"store.path={tmp_path / 's.db'}", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    first, fix = done.stderr.splitlines()[:2]
    assert first.startswith("error: service 'mock': service.mock.judge_sensitivity=0.85: this service is not")
    assert "judge.mock_sensitivity=0.85" in fix
    assert not (tmp_path / "s.db").exists()  # refused before anything ran


def test_the_judges_error_rates_reach_the_judge_when_the_candidate_is_another_service(
        tmp_path: Path, url: str) -> None:
    """The candidate is a mock in its own process (not the run's), answering every case right: a
    judge told to pass nothing right fails every case."""
    common = [f"registry={_registry(tmp_path / 'reg', 'mock_judge')}", "eval=g.e",
              "service.mock.enabled=false", f"service.base_url={url}", "report=[json]", "run.progress=false"]
    honest = evalhydra.evaluate([*common, f"store.path={tmp_path / 'a.db'}"])
    assert honest.stats[0]["passed"] == CASES
    blind = evalhydra.evaluate([*common, f"store.path={tmp_path / 'b.db'}", "judge.mock_sensitivity=0"])
    assert blind.stats[0]["passed"] == 0 and blind.stats[0]["scored"] == CASES


def test_error_rates_for_a_judge_that_is_not_the_mock_are_refused(tmp_path: Path) -> None:
    with pytest.raises(EvalHydraError, match=r"judge.mock_specificity=0.5: judge service 'vllm' is not the"):
        evalhydra.evaluate([f"registry={_registry(tmp_path / 'reg', 'vllm')}", "eval=g.e",
                            f"store.path={tmp_path / 's.db'}", "judge.mock_specificity=0.5"])
    with pytest.raises(EvalHydraError, match=r"judge.mock_sensitivity=1.5: must be in 0..1"):
        evalhydra.evaluate([f"registry={_registry(tmp_path / 'reg', 'mock_judge')}", "eval=g.e",
                            f"store.path={tmp_path / 's.db'}", "judge.mock_sensitivity=1.5"])
