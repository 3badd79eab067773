"""Issue 51, item 9: BFCL-format files load as cases (the question, the functions as the case's
tools, the ground truth from BFCL's possible-answer file), and ``bfcl_ast`` scores the calls as
BFCL's AST checker does; the project's small suite in BFCL's shape runs offline."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, ToolCall
from evalhydra.matchers.base import MatchContext
from evalhydra.matchers.bfcl import bfcl_ast_match
from evalhydra.registry.datasets import iter_cases
from tests.helpers import query_rows, run_cli

LINE = {"id": "p_0", "question": [[{"role": "user", "content": "Areas, please."}]],
        "function": [{"name": "area", "description": "An area.", "parameters": {
            "type": "dict", "properties": {"side": {"type": "float"}, "shape": {"type": "string"},
                                           "tags": {"type": "tuple", "items": {"type": "any"}}},
            "required": ["side"]}}]}
TRUTH = [{"area": {"side": [2.0], "shape": ["Square", ""]}}, {"area": {"side": [3], "shape": ["circle"]}}]


def _write(folder: Path, lines: list[dict[str, Any]], answers: list[dict[str, Any]] | None) -> Path:
    (folder / "data").mkdir(parents=True)
    dataset = folder / "data" / "BFCL_v3_x.json"
    dataset.write_text("".join(json.dumps(x) + "\n" for x in lines))
    if answers is not None:
        (folder / "data" / "possible_answer").mkdir()
        (folder / "data" / "possible_answer" / "BFCL_v3_x.json").write_text(
            "".join(json.dumps(x) + "\n" for x in answers))
    return dataset


def test_a_bfcl_file_loads_as_cases_with_their_own_tools(tmp_path: Path) -> None:
    _write(tmp_path, [LINE], [{"id": "p_0", "ground_truth": TRUTH}])
    (case,) = iter_cases(tmp_path, "data/BFCL_v3_x.json")
    assert case.messages is not None and case.messages[0]["content"] == "Areas, please."
    (tool,) = case.tools
    assert tool.parameters["type"] == "object" and tool.parameters["properties"]["side"]["type"] == "number"
    assert tool.parameters["properties"]["tags"] == {"type": "array", "items": {}}
    assert json.loads(case.ideal or "") == TRUTH
    _write(tmp_path / "b", [{**LINE, "ground_truth": TRUTH[:1]}], None)  # its own, no answer file
    (own,) = iter_cases(tmp_path / "b", "data/BFCL_v3_x.json")
    assert json.loads(own.ideal or "") == TRUTH[:1]


def test_a_multi_turn_question_is_refused_naming_the_line(tmp_path: Path) -> None:
    turns = {**LINE, "question": [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]}
    _write(tmp_path, [LINE, turns], None)
    with pytest.raises(EvalHydraError) as caught:
        list(iter_cases(tmp_path, "data/BFCL_v3_x.json"))
    where = tmp_path / "data" / "BFCL_v3_x.json"
    assert caught.value.message.startswith(f"{where}:2: a BFCL question of 2 turns")


def _score(calls: list[tuple[str, Any]]) -> tuple[bool, str | None]:
    ctx = MatchContext(case=Case(id="p", input="x", ideal=json.dumps(TRUTH)), output="",
                       tool_calls=tuple(ToolCall(n, a if isinstance(a, str) else json.dumps(a))
                                        for n, a in calls))
    result = bfcl_ast_match(ctx)
    return result.passed, result.reason


@pytest.mark.parametrize(("calls", "ok", "why"), [
    ([("area", {"side": 3, "shape": "circle"}), ("area", {"side": 2})], True, None),  # any order; "" optional
    ([("area", {"side": 2.0, "shape": "square"}), ("area", {"side": 3.0, "shape": "Circle"})], True, None),
    ([("area", {"side": 2})], False, "1 function call(s), the ground truth has 2"),
    ([("area", {"side": 2}), ("area", {"shape": "circle"})], False, "missing required parameter 'side'"),
    ([("area", {"side": 2}), ("area", {"side": 4, "shape": "circle"})], False, "side=4 is not one of [3]"),
    ([("area", {"side": 2}), ("area", {"side": 3, "shape": "circle", "x": 1})], False, "unexpected"),
    ([("area", {"side": 2}), ("volume", {"side": 3})], False, "wrong function 'volume'"),
    ([("area", {"side": True}), ("area", {"side": 3, "shape": "circle"})], False, "is not one of"),
    ([("area", "{not json"), ("area", {"side": 3, "shape": "circle"})], False, "not a JSON object"),
])
def test_bfcl_ast_scores_as_bfcls_checker(calls: list[tuple[str, Any]], ok: bool, why: str | None) -> None:
    passed, reason = _score(calls)
    assert passed is ok and (why is None or (reason is not None and why in reason)), reason


@pytest.mark.slow
def test_the_projects_bfcl_suite_runs_offline(tmp_path: Path) -> None:
    done = run_cli("eval=tools.bfcl_mini", f"store.path={tmp_path / 's.db'}", "run.progress=false",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = query_rows(tmp_path / "s.db",
                      "select case_id, passed, failure_reason from results order by case_id")
    assert rows == [{"case_id": "multiple_0", "passed": 0,
                     "failure_reason": "triangle_area: base=1 is not one of [10]"},
                    {"case_id": "simple_0", "passed": 1, "failure_reason": None},
                    {"case_id": "simple_1", "passed": 1, "failure_reason": None}]


FIXTURE = Path(__file__).with_name("fixtures") / "bfcl"


def test_rows_of_the_real_bfcl_files_load_as_the_chat_api_takes_them(tmp_path: Path) -> None:
    """Verbatim lines of BFCL's public BFCL_v3_simple.json and its possible answers (simple_0,
    simple_1 with a dotted name, simple_13 with a list-valued parameter)."""
    cases = {c.id: c for c in iter_cases(FIXTURE.parent, "bfcl/BFCL_v3_simple.json")}
    assert sorted(cases) == ["simple_0", "simple_1", "simple_13"]
    for case in cases.values():
        for tool in case.tools:  # OpenAI function names, JSON Schema types
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tool.name), tool.name
            assert tool.parameters["type"] == "object"
    assert [t.name for t in cases["simple_1"].tools] == ["math_factorial"]
    assert json.loads(cases["simple_1"].ideal or "") == [{"math_factorial": {"number": [5]}}]

    def score(case_id: str, name: str, arguments: dict[str, Any]) -> bool:
        call = ToolCall(name, json.dumps(arguments))
        ctx = MatchContext(case=cases[case_id], output="", tool_calls=(call,))
        return bfcl_ast_match(ctx).passed

    assert score("simple_0", "calculate_triangle_area", {"base": 10, "height": 5})
    assert not score("simple_0", "calculate_triangle_area", {"base": 10, "height": 6})
    assert score("simple_1", "math_factorial", {"number": 5})
    assert score("simple_13", "calculate_area_under_curve", {"function": "x**2", "interval": [1, 3]})
    assert not score("simple_13", "calculate_area_under_curve", {"function": "x**2", "interval": [1, 3.5]})
