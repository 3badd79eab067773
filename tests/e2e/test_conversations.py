"""Conversations, prompt templates, per-eval params and CSV / OpenAI-evals datasets, checked by
the exact request bodies the mock server receives."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

from evalhydra.core.errors import EvalHydraError
from evalhydra.job.run import run_plan
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import count_cells, planned_cells
from evalhydra.store.db import open_store
from tests.conftest import smoke_eval, write_registry
from tests.helpers import chat_requests, mock_call

Compose = Callable[..., DictConfig]


def _registry(tmp_path: Path, data: str, *, dataset: str = "data/g/e/test.jsonl", **spec: Any) -> Path:
    return write_registry(tmp_path / "reg", evals={"g/e.json": smoke_eval("g.e", dataset, **spec)},
                          data={dataset: data})


def _run(compose: Compose, registry: Path, url: str, *extra: str) -> dict[str, Any]:
    """Run eval g.e against the mock at ``url``; return the last chat request body it received."""
    plan = build_plan(compose(f"registry={registry}", "eval=g", "service=mock", "service.mock.enabled=false",
                              f"service.base_url={url}", "run.concurrency=1", *extra))
    assert run_plan(plan, output_dir=Path(str(plan.store_path)).parent / "out") in (0, 1)
    return mock_call(url, "last")


CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say A."},
    {"role": "assistant", "content": "A"},
    {"role": "user", "content": "Reply with exactly B."},
]


def test_a_message_list_is_sent_as_the_conversation(compose: Compose, url: str, tmp_path: Path) -> None:
    registry = _registry(tmp_path, json.dumps({"id": "c1", "input": CONVERSATION, "ideal": "B"}) + "\n")
    body = _run(compose, registry, url, "service.system_prompt=Ignored when the case has one.")
    assert body["messages"] == CONVERSATION
    store = open_store(tmp_path / "store.db", read_only=True)
    (row,) = store.query("select input, passed from results")
    assert json.loads(row["input"]) == CONVERSATION and row["passed"] == 1
    store.close()


def test_the_service_system_prompt_is_prepended_only_without_a_system_message(
        compose: Compose, url: str, tmp_path: Path) -> None:
    turns = CONVERSATION[1:]
    registry = _registry(tmp_path, json.dumps({"id": "c1", "input": turns, "ideal": "B"}) + "\n")
    body = _run(compose, registry, url, "service.system_prompt=Be brief.")
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, *turns]


def test_attachments_join_the_last_user_message(compose: Compose, url: str, tmp_path: Path) -> None:
    line = {"id": "c1", "input": CONVERSATION, "ideal": "B",
            "attachments": [{"kind": "file", "path": "assets/notes.txt"}]}
    registry = _registry(tmp_path, json.dumps(line) + "\n")
    (registry / "assets").mkdir()
    (registry / "assets" / "notes.txt").write_text("NOTE")
    body = _run(compose, registry, url)
    assert body["messages"][:3] == CONVERSATION[:3]
    assert body["messages"][3] == {"role": "user", "content": [{
        "type": "text",
        "text": "Reply with exactly B.\n\n[Attachment: assets/notes.txt (text/plain)]\n```text\nNOTE\n```"}]}


@pytest.mark.parametrize(("bad", "message"), [
    ([{"role": "robot", "content": "x"}], "input messages[0].role is 'robot'; use one of system, user"),
    ([{"role": "user", "content": 3}],
     "input messages[0].content must be a string or a list of content parts"),
    ([{"role": "system", "content": "only a system message"}],
     "input messages need at least one user message"),
])
def test_an_invalid_message_list_is_a_file_line_error(compose: Compose, tmp_path: Path, bad: Any,
                                                      message: str) -> None:
    lines = json.dumps({"id": "c0", "input": "fine"}) + "\n" + json.dumps({"id": "c1", "input": bad}) + "\n"
    registry = _registry(tmp_path, lines)
    plan = build_plan(compose(f"registry={registry}", "eval=g"))
    with pytest.raises(EvalHydraError) as exc:
        count_cells(plan)  # what a run does first, before any call
    assert f"test.jsonl:2: {message}" in str(exc.value)


def test_a_prompt_template_is_filled_from_each_cases_fields(compose: Compose, url: str,
                                                             tmp_path: Path) -> None:
    lines = json.dumps({"id": "c1", "word": "B", "ideal": "B"}) + "\n"
    registry = _registry(tmp_path, lines, prompt="Reply with exactly {{word}}.")
    body = _run(compose, registry, url)
    assert body["messages"] == [{"role": "user", "content": "Reply with exactly B."}]


def test_a_messages_template_and_a_missing_variable(compose: Compose, url: str, tmp_path: Path) -> None:
    template = [{"role": "system", "content": "Answer in one word."},
                {"role": "user", "content": "Reply with exactly {{word}}."}]
    registry = _registry(tmp_path, json.dumps({"id": "c1", "word": "B", "ideal": "B"}) + "\n",
                         messages=template)
    body = _run(compose, registry, url)
    assert body["messages"] == [{"role": "system", "content": "Answer in one word."},
                                {"role": "user", "content": "Reply with exactly B."}]
    (registry / "data/g/e/test.jsonl").write_text(json.dumps({"id": "c2", "wrd": "B"}) + "\n")
    plan = build_plan(compose(f"registry={registry}", "eval=g"))
    missing = r"test.jsonl:1: template variable 'word' is not a field of this case"
    with pytest.raises(EvalHydraError, match=missing):
        list(planned_cells(plan))


@pytest.mark.slow
def test_eval_params_merge_over_the_service_params_and_are_sweepable(compose: Compose, url: str,
                                                                     tmp_path: Path) -> None:
    line = json.dumps({"id": "c1", "input": "Reply with exactly B.", "ideal": "B"}) + "\n"
    registry = _registry(tmp_path, line,
                         params={"temperature": 0.2, "max_tokens": 16})
    body = _run(compose, registry, url, "service.params.temperature=1.0", "service.params.top_p=0.5")
    assert (body["temperature"], body["max_tokens"], body["top_p"]) == (0.2, 16, 0.5)  # the eval wins
    body = _run(compose, registry, url, "eval.params.temperature=0.7", "eval.params.seed=7")
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.7, 7, 16)
    assert chat_requests(url) == 2  # a changed parameter is a new cell; the same one is not


@pytest.mark.slow
def test_changing_a_template_or_a_param_reruns_exactly_the_affected_cells(compose: Compose, url: str,
                                                                          tmp_path: Path) -> None:
    registry = _registry(tmp_path, "".join(json.dumps({"id": f"c{i}", "w": "B", "ideal": "B"}) + "\n"
                                           for i in range(3)), prompt="Reply with exactly {{w}}.")
    _run(compose, registry, url)
    _run(compose, registry, url)
    assert chat_requests(url) == 3
    _run(compose, registry, url, "eval.prompt='Say exactly {{w}}.'")
    assert chat_requests(url) == 6
    _run(compose, registry, url, "eval.params.temperature=0")
    assert chat_requests(url) == 9


def test_a_csv_dataset(compose: Compose, url: str, tmp_path: Path) -> None:
    csv_text = 'question,ideal\n"Reply with exactly B.",B\n"Reply with exactly C, please.",C\n'
    registry = _registry(tmp_path, csv_text, dataset="data/g/e/test.csv", prompt="{{question}}")
    body = _run(compose, registry, url)
    assert body["messages"] == [{"role": "user", "content": "Reply with exactly C, please."}]
    store = open_store(tmp_path / "store.db", read_only=True)
    rows = list(store.query("select case_id, passed from results order by case_id"))
    assert rows == [{"case_id": "2", "passed": 1}, {"case_id": "3", "passed": 0}]  # ids are row numbers
    store.close()
    (registry / "data/g/e/test.csv").write_text('question,ideal\n"ok",B\n"a","b","extra"\n')
    with pytest.raises(EvalHydraError, match=r"test.csv:3: the row has another number of fields"):
        list(planned_cells(build_plan(compose(f"registry={registry}", "eval=g"))))


def test_an_openai_evals_dataset(compose: Compose, url: str, tmp_path: Path) -> None:
    samples = [{"input": [{"role": "system", "content": "Be exact."},
                          {"role": "user", "content": "Reply with exactly B."}], "ideal": ["C", "B"]},
               {"input": [{"role": "user", "content": "Reply with exactly D."}], "ideal": "D"}]
    registry = _registry(tmp_path, "".join(json.dumps(s) + "\n" for s in samples))
    body = _run(compose, registry, url)
    assert body["messages"] == samples[1]["input"]
    store = open_store(tmp_path / "store.db", read_only=True)
    rows = list(store.query("select case_id, ideal, passed from results order by case_id"))
    assert rows == [{"case_id": "1", "ideal": "C", "passed": 1},  # any listed ideal passes
                    {"case_id": "2", "ideal": "D", "passed": 1}]
    store.close()


def test_a_judge_reads_the_conversation_as_text(compose: Compose, url: str, tmp_path: Path) -> None:
    registry = write_registry(
        tmp_path / "reg",
        evals={"g/e.json": smoke_eval("g.e", matcher={"kind": "model_grade", "judge_service": "judge",
                                                    "rubric": "Is the answer B?"})},
        data={"data/g/e/test.jsonl": json.dumps({"id": "c1", "input": CONVERSATION, "ideal": "B"}) + "\n"},
        services=[{"name": "judge", "base_url": url, "default_model": "mock-judge", "timeout_ms": 5000}])
    judged = _run(compose, registry, url)  # the judge call comes last
    prompt = judged["messages"][-1]["content"]
    assert "system: You are terse.\n\nuser: Say A.\n\nassistant: A\n\nuser: Reply with exactly B." in prompt
