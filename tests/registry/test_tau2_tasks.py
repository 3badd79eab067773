"""Issue 63, item 3: τ²-bench task files load as datasets unchanged (real airline and retail tasks),
one case per task, the scenario as the simulated user's fields and the criteria for the tau2
matcher; a file τ²-bench would refuse is refused with the task it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.registry.datasets import iter_cases
from evalhydra.registry.tau2 import is_task_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tau2"


def _cases(path: Path) -> list:
    return list(iter_cases(path.parent, path.name))


def test_real_airline_tasks_load_as_they_are() -> None:
    cases = _cases(FIXTURES / "airline_tasks.json")
    assert [c.id for c in cases] == ["0", "1", "2", "3", "4"]
    first = cases[3]
    assert first.input == "" and first.messages is None  # the simulated user speaks first
    assert first.user["known_info"].startswith("You are Anya Garcia.")
    assert first.user["unknown_info"] == "You do not know the cabin for the upcoming flight."
    assert first.user["persona"] == "" and first.user["domain"] == "airline"  # null reads as empty
    criteria = first.expected["tau2"]["evaluation_criteria"]
    assert criteria["reward_basis"] == ["DB", "COMMUNICATE"] and criteria["communicate_info"] == ["4"]
    assert [a["name"] for a in criteria["actions"]] == ["get_reservation_details", "get_user_details"]


def test_real_retail_tasks_keep_their_natural_language_assertions() -> None:
    cases = _cases(FIXTURES / "retail_tasks.json")
    criteria = cases[0].expected["tau2"]["evaluation_criteria"]
    assert criteria["reward_basis"] == ["DB", "NL_ASSERTION"]
    assert len(cases[2].expected["tau2"]["evaluation_criteria"]["nl_assertions"]) == 1
    raw = json.loads((FIXTURES / "retail_tasks.json").read_text())[0]
    assert criteria == raw["evaluation_criteria"]  # unchanged


def test_a_task_file_is_told_from_jsonl_by_its_first_byte(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('  [{"id": "1"}]')
    (tmp_path / "b.json").write_text('{"id": "1", "input": "x"}\n')
    assert is_task_file(tmp_path / "a.json") and not is_task_file(tmp_path / "b.json")


@pytest.mark.parametrize(("tasks", "message"), [
    ([{"id": "t1"}], r"task 1 \(t1\): 'user_scenario' needs 'instructions'"),
    ([{"id": "t1", "user_scenario": {"instructions": {"reason_for_call": "x"}}}],
     "task_instructions is required"),
    ([{"id": "t1", "user_scenario": {"instructions": "x"},
       "evaluation_criteria": {"reward_basis": ["DATABASE"]}}],
     "reward_basis 'DATABASE' is not one of DB, ENV_ASSERTION"),
    ([{"user_scenario": {"instructions": "x"}}], r"task 1: 'id' is required"),
    ([{"id": "t1", "user_scenario": {"instructions": "x"}},
      {"id": "t1", "user_scenario": {"instructions": "y"}}],
     "duplicate case id 't1'"),
    ([{"id": "t1", "user_scenario": {"instructions": "x"},
       "evaluation_criteria": {"actions": [{"name": "cancel", "arguments": "all"}]}}],
     r"actions\[0\] needs a name and arguments"),
])
def test_a_task_tau2_would_refuse_is_refused_naming_it(tmp_path: Path, tasks: list, message: str) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(tasks))
    with pytest.raises(EvalHydraError, match=message):
        _cases(path)


def test_a_file_that_is_not_an_array_of_tasks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text("[1, 2")
    with pytest.raises(EvalHydraError, match="invalid JSON"):
        _cases(path)
