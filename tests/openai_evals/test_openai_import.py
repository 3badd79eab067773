"""OpenAI Evals definitions built with the ``openai`` SDK's own types, dumped as the API returns them,
imported with ``evalhydra import openai-evals``, and run against the mock: every grader's stored
score checked against a value worked out by hand, and the graders' names in every report."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from openai.types import EvalRetrieveResponse
from openai.types.eval_retrieve_response import (
    TestingCriterionEvalGraderPython,
    TestingCriterionEvalGraderScoreModel,
    TestingCriterionEvalGraderTextSimilarity,
)
from openai.types.evals import RunRetrieveResponse
from openai.types.evals.run_retrieve_response import ResultCounts
from openai.types.evals.runs import OutputItemListResponse
from openai.types.graders import LabelModelGrader, MultiGrader, StringCheckGrader, TextSimilarityGrader

from tests.helpers import run_cli

ITEMS = [
    {"question": "Capital of France?", "answer": "Paris", "reference": "Paris", "grade": 9, "tone": "polite",
     "facts": {"country": "France"}},
    {"question": "Capital of France?", "answer": "Lyon", "reference": "Paris", "grade": 3, "tone": "rude",
     "facts": {"country": "France"}},
]
PYTHON_SOURCE = """
def grade(sample, item):
    # a half for naming the right country's capital, a half for a short answer
    right = sample["output_text"] == item["reference"]
    return 0.5 * right + 0.5 * (len(sample["output_text"]) <= 5)
"""


def eval_object() -> dict[str, Any]:
    """An eval as ``client.evals.retrieve`` returns it (six graders), plus a multi grader, dumped."""
    criteria = [
        StringCheckGrader(type="string_check", name="exact", input="{{ sample.output_text }}",
                          reference="{{ item.reference }}", operation="eq"),
        TestingCriterionEvalGraderTextSimilarity(
            type="text_similarity", name="fuzzy", input="{{sample.output_text}}",
            reference="{{item.reference}}", evaluation_metric="fuzzy_match", pass_threshold=0.8),
        TestingCriterionEvalGraderTextSimilarity(
            type="text_similarity", name="cosine", input="{{sample.output_text}}",
            reference="{{item.reference}}", evaluation_metric="cosine", pass_threshold=0.9),
        TestingCriterionEvalGraderScoreModel(
            type="score_model", name="quality", model="o3-mini", range=[0, 10], pass_threshold=6,
            input=[{"role": "developer", "content": "Rate the answer from 0 to 10."},
                   {"role": "user", "content": "{{sample.output_text}} for {{item.facts.country}}."
                                               " Reply with exactly {{item.grade}}."}]),
        LabelModelGrader(type="label_model", name="tone", model="gpt-4o-mini", labels=["polite", "rude"],
                         passing_labels=["polite"],
                         input=[{"role": "user", "content": "Reply with exactly {{item.tone}}."}]),
        TestingCriterionEvalGraderPython(type="python", name="short_and_right", source=PYTHON_SOURCE,
                                         pass_threshold=0.75),
    ]
    retrieved = EvalRetrieveResponse(
        id="eval_67abc", object="eval", created_at=1_700_000_000, name="Capitals QA",
        data_source_config={"type": "custom", "schema": {"type": "object"}}, testing_criteria=criteria)
    dumped = json.loads(retrieved.model_dump_json())
    # The API takes a multi grader's graders as an object of named graders (the SDK's MultiGrader
    # types one grader): each is an SDK grader, dumped.
    exact = StringCheckGrader(type="string_check", name="exact", input="{{sample.output_text}}",
                              reference="{{item.reference}}", operation="eq")
    close = TextSimilarityGrader(type="text_similarity", name="fuzzy", input="{{sample.output_text}}",
                                 reference="{{item.reference}}", evaluation_metric="fuzzy_match")
    dumped["testing_criteria"].append({
        "type": "multi", "name": "blend", "calculate_output": "0.5 * exact + 0.5 * fuzzy",
        "pass_threshold": 0.5,
        "graders": {"exact": exact.model_dump(), "fuzzy": close.model_dump()}})
    return dumped


def run_object(source: dict[str, Any]) -> dict[str, Any]:
    """A completions run as ``client.evals.runs.retrieve`` returns it, dumped."""
    retrieved = RunRetrieveResponse.model_validate({
        "id": "evalrun_1", "object": "eval.run", "created_at": 1_700_000_100, "eval_id": "eval_67abc",
        "name": "gpt-4o-mini baseline", "model": "gpt-4o-mini", "status": "completed", "report_url": "",
        "error": {"code": "", "message": ""}, "per_model_usage": [], "per_testing_criteria_results": [],
        "result_counts": {"errored": 0, "failed": 1, "passed": 1, "total": 2},
        "data_source": {
            "type": "completions", "model": "gpt-4o-mini", "source": source,
            "sampling_params": {"temperature": 0, "max_completion_tokens": 16, "seed": 7},
            "input_messages": {"type": "template", "template": [
                {"role": "developer", "content": "Answer with one word."},
                {"role": "user", "content": "{{item.question}} Reply with exactly {{item.answer}}."}]}}})
    return json.loads(retrieved.model_dump_json())


#: Every criterion's score by case, by hand: (output, reference) = (Paris, Paris) and (Lyon, Paris).
#: fuzzy: rapidfuzz's ratio is 1 − indel distance / total length, and Lyon and Paris share no
#: character in order (0); cosine: the mock embeds letter counts, and Lyon and Paris share no letter (0).
EXPECTED = {
    "item-1": {"exact": (1.0, True), "fuzzy": (1.0, True), "cosine": (1.0, True), "quality": (9.0, True),
               "tone": (1.0, True), "short_and_right": (1.0, True), "blend": (1.0, True)},
    "item-2": {"exact": (0.0, False), "fuzzy": (0.0, False), "cosine": (0.0, False), "quality": (3.0, False),
               "tone": (0.0, False), "short_and_right": (0.5, False), "blend": (0.0, False)},
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("openai")
    (root / "eval.json").write_text(json.dumps(eval_object()))
    (root / "run.json").write_text(json.dumps(run_object(
        {"type": "file_content", "content": [{"item": item} for item in ITEMS]})))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=root)
    assert done.returncode == 0, done.stderr
    return root, done


def test_the_import_writes_an_eval_that_keeps_the_items_and_the_graders(imported: tuple[Path, Any]) -> None:
    root, done = imported
    spec = json.loads((root / "reg/evals/openai/capitals_qa.json").read_text())
    assert spec["matcher"]["kind"] == "openai_graders" and spec["matcher"]["judge_service"] == "mock_judge"
    assert spec["matcher"]["testing_criteria"] == eval_object()["testing_criteria"]  # unchanged
    assert spec["params"] == {"temperature": 0, "max_completion_tokens": 16, "seed": 7}
    lines = [json.loads(x) for x in (root / spec["dataset_path"].join(["reg/", ""])).read_text().splitlines()]
    assert [x["item"] for x in lines] == ITEMS and [x["id"] for x in lines] == ["item-1", "item-2"]
    assert lines[1]["input"] == [  # rendered as OpenAI renders the template; developer is a system message
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": "Capital of France? Reply with exactly Lyon."}]
    assert "service.model=gpt-4o-mini" in done.stdout and "eval=openai.capitals_qa" in done.stdout


@pytest.fixture(scope="module")
def ran(imported: tuple[Path, Any]) -> tuple[Path, Any]:
    root, _ = imported
    done = run_cli("registry=reg", "eval=openai.capitals_qa", f"store.path={root / 's.db'}",
                   "run.progress=false",
                   "report=[json,md,html]", "hydra.run.dir=out", cwd=root)
    assert done.returncode == 0, done.stderr
    return root, done


def test_every_grader_scores_as_worked_out_by_hand(ran: tuple[Path, Any]) -> None:
    root, _ = ran
    conn = sqlite3.connect(root / "s.db")
    rows = dict(conn.execute("select case_id, grader_scores from results").fetchall())
    for case, expected in EXPECTED.items():
        stored = json.loads(rows[case])
        got = {name: (pytest.approx(v["score"]), v["passed"]) for name, v in stored.items()}
        assert got == expected, case
    verdicts = dict(conn.execute("select case_id, passed from results").fetchall())
    assert verdicts == {"item-1": 1, "item-2": 0}  # a result passes when every criterion passes
    score = conn.execute("select score from results where case_id = 'item-2'").fetchone()[0]
    assert score == pytest.approx((0 + 0 + 0 + 0.3 + 0 + 0.5 + 0) / 7)  # the quality's 3 of 10 is 0.3


def test_the_model_graders_called_the_judge_service(ran: tuple[Path, Any]) -> None:
    root, _ = ran
    conn = sqlite3.connect(root / "s.db")
    tokens = conn.execute("select sum(judge_prompt_tokens) > 0, count(*) from results").fetchone()
    assert tokens == (1, 2)  # score and label models were called through the judge service


def test_reports_and_sql_keep_the_graders_names(ran: tuple[Path, Any]) -> None:
    root, done = ran
    assert "graders (each testing criterion" in done.stdout and "short_and_right" in done.stdout
    report = (root / "out/report.md").read_text()
    assert "## Graders" in report and "| openai.capitals_qa" in report
    cells = [c.strip() for c in next(x for x in report.splitlines() if "| quality" in x).split("|")]
    assert cells[4:8] == ["2", "1", "50.0%", "6"]  # 2 results, 1 passed, mean of 9 and 3
    assert 'id="grader-table"' in (root / "out/report.html").read_text()
    conn = sqlite3.connect(root / "s.db")
    stats = {g: (n, p, m) for g, n, p, m in conn.execute(
        "select grader, results, passed, mean_score from grader_stats")}
    assert stats["quality"] == (2, 1, 6.0) and stats["short_and_right"] == (2, 1, 0.75)
    assert len(stats) == 7


@pytest.mark.slow
def test_a_file_id_source_reads_the_jsonl_kept_beside_the_run(tmp_path: Path) -> None:
    (tmp_path / "eval.json").write_text(json.dumps(eval_object()))
    (tmp_path / "run.json").write_text(json.dumps(run_object({"type": "file_id", "id": "file-abc"})))
    refused = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("error:") == 1
    assert "run.json: $.data_source.source.id: the items of file file-abc are not here" in refused.stderr
    assert not (tmp_path / "reg").exists()  # nothing written
    (tmp_path / "items.jsonl").write_text("".join(json.dumps({"item": i}) + "\n" for i in ITEMS))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg",
                   "--file", "file-abc=items.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "openai.capitals_qa: 2 cases" in done.stdout


@pytest.mark.parametrize(("change", "message"), [
    (lambda e, r: r["data_source"].update(source={"type": "stored_completions"}),
     "run.json: $.data_source.source.type: 'stored_completions' sources are not imported"),
    (lambda e, r: r["data_source"]["input_messages"]["template"][1].update(
        content="{{item.missing}}"),
     "run.json: $.data_source.input_messages.template[1].content: '{{item.missing}}': 'missing' is"
     " not in the item"),
    (lambda e, r: e["testing_criteria"][0].update(operation="startswith"),
     "eval.json: $: testing_criteria[0] ('exact').operation: 'startswith' is not a string check"),
    pytest.param(lambda e, r: e["testing_criteria"].append({"type": "bleurt", "name": "b"}),
                 "eval.json: $: testing_criteria[7].type: 'bleurt' is not a grader type evalhydra runs",
                 marks=pytest.mark.slow),
    pytest.param(lambda e, r: e["testing_criteria"][5].update(source="def grade(sample, item) return 1"),
                 "eval.json: $: testing_criteria[5] ('short_and_right').source: its source does not compile",
                 marks=pytest.mark.slow),
])
def test_what_cannot_run_the_same_way_is_refused_with_its_json_path(tmp_path: Path, change: Any,
                                                                   message: str) -> None:
    evaluation, run = eval_object(), run_object({"type": "file_content", "content": [{"item": ITEMS[0]}]})
    change(evaluation, run)
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    (tmp_path / "run.json").write_text(json.dumps(run))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert message in done.stderr
    assert not (tmp_path / "reg").exists()


@pytest.mark.slow
def test_a_multi_grader_as_the_sdk_types_it_runs_its_one_grader(tmp_path: Path) -> None:
    evaluation = eval_object()
    single = MultiGrader(type="multi", name="solo", calculate_output="2 * exact - 1",
                         graders=StringCheckGrader(type="string_check", name="exact", operation="ilike",
                                                   input="{{sample.output_text}}", reference="paris"))
    evaluation["testing_criteria"] = [single.model_dump()]
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    (tmp_path / "run.json").write_text(json.dumps(run_object(
        {"type": "file_content", "content": [{"item": item} for item in ITEMS]})))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert done.returncode == 0
    assert run_cli("registry=reg", "eval=openai.capitals_qa", "store.path=s.db", "run.progress=false",
                   cwd=tmp_path).returncode == 0
    scores = sqlite3.connect(tmp_path / "s.db").execute(
        "select case_id, json_extract(grader_scores, '$.solo.score'), passed from results order by case_id")
    assert scores.fetchall() == [("item-1", 1.0, 1), ("item-2", -1.0, 0)]  # 2·0 − 1 is below the middle, 0.5


@pytest.mark.slow
def test_in_batch_mode_the_graders_score_the_same(tmp_path: Path) -> None:
    (tmp_path / "eval.json").write_text(json.dumps(eval_object()))
    (tmp_path / "run.json").write_text(json.dumps(run_object(
        {"type": "file_content", "content": [{"item": item} for item in ITEMS]})))
    # the candidate's own service judges: its judge calls go through the batch too
    imported = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg",
                       "--judge-service", "mock", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    done = run_cli("registry=reg", "eval=openai.capitals_qa", "store.path=s.db", "run.progress=false",
                   "service.batch.enabled=true", "service.batch.poll_interval_s=0.05", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(tmp_path / "s.db")
    rows = conn.execute("select case_id, batched, grader_scores from results order by case_id").fetchall()
    assert [(case, batched) for case, batched, _ in rows] == [("item-1", 1), ("item-2", 1)]
    for case, _, scores in rows:  # cosine's embeddings go online beside the batch
        got = {name: (pytest.approx(v["score"]), v["passed"]) for name, v in json.loads(scores).items()}
        assert got == EXPECTED[case]


def test_the_printed_commands_quote_what_the_export_names(tmp_path: Path) -> None:
    """Issue 47, item 10: a model named ``gpt-4o; touch x #`` stays one argument when the printed
    command is pasted, and Hydra reads it back as that model."""
    run = run_object({"type": "file_content", "content": [{"item": item} for item in ITEMS]})
    run["model"] = run["data_source"]["model"] = "gpt-4o; touch x #"
    (tmp_path / "eval.json").write_text(json.dumps(eval_object()))
    (tmp_path / "run.json").write_text(json.dumps(run))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "my reg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if "on its model:" in x]
    words = shlex.split(line.split("on its model: ", 1)[1])
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(words[3:])}
    assert parsed == {"registry": "my reg", "eval": "openai.capitals_qa", "service": "openai",
                      "service.model": "gpt-4o; touch x #", "judge_service": "openai"}
    shell = subprocess.run(["bash", "-c", f"set -- {line.split('on its model: ', 1)[1]}; echo $#"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert shell.stdout.strip() == "8" and not (tmp_path / "x").exists()  # nothing ran


@pytest.mark.slow
def test_an_export_as_the_live_api_returns_it_imports_and_grades_as_openai_does(tmp_path: Path) -> None:
    """Issue 49: every criterion the API returns carries an ``id`` (and the eval ``metadata``); grader
    strings are compared byte for byte; a score model's answer outside its range is cut to it and
    one that is no number counts 0; one grader failing for one item errors that grader only."""
    evaluation = eval_object()
    evaluation["metadata"] = {}
    evaluation["testing_criteria"][0]["reference"] = "Paris "  # a trailing space: eq never holds
    evaluation["testing_criteria"].append({
        "type": "string_check", "name": "nick", "input": "{{item.nickname}}", "reference": "P",
        "operation": "eq"})  # item-2 has no nickname
    evaluation["testing_criteria"].append({
        "type": "multi", "name": "ratio", "calculate_output": "exact / fuzzy",
        "graders": {"exact": StringCheckGrader(type="string_check", name="exact", operation="eq",
                                               input="{{sample.output_text}}",
                                               reference="{{item.reference}}").model_dump(),
                    "fuzzy": TextSimilarityGrader(type="text_similarity", name="fuzzy",
                                                  input="{{sample.output_text}}",
                                                  reference="{{item.reference}}",
                                                  evaluation_metric="fuzzy_match").model_dump()}})
    for index, criterion in enumerate(evaluation["testing_criteria"]):
        criterion["id"] = f"{criterion['name']}-{index:04x}"  # read-only, as the API returns them
    items = [{**ITEMS[0], "grade": "14", "nickname": "P"}, {**ITEMS[1], "grade": "lots"}]
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    (tmp_path / "run.json").write_text(json.dumps(run_object(
        {"type": "file_content", "content": [{"item": item} for item in items]})))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "judge_service=openai" in next(x for x in done.stdout.splitlines() if "on its model" in x)
    ran = run_cli("registry=reg", "eval=openai.capitals_qa", f"store.path={tmp_path / 's.db'}",
                  "run.progress=false", "report=[]", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    conn = sqlite3.connect(tmp_path / "s.db")
    scores = {case: json.loads(text)
              for case, text in conn.execute("select case_id, grader_scores from results")}
    errors = dict(conn.execute("select case_id, error_kind from results").fetchall())
    conn.close()
    assert errors == {"item-1": None, "item-2": None}  # graders errored, the items were measured
    assert scores["item-1"]["exact"]["passed"] is False  # "Paris" is not "Paris "
    assert (scores["item-1"]["quality"]["score"], scores["item-1"]["quality"]["passed"]) == (10, True)
    assert (scores["item-2"]["quality"]["score"], scores["item-2"]["quality"]["passed"]) == (0, False)
    assert scores["item-1"]["quality"]["answer"] == "14" and scores["item-2"]["quality"]["answer"] == "lots"
    assert scores["item-1"]["nick"] == {"score": 1.0, "passed": True, "type": "string_check", "scaled": 1.0}
    assert scores["item-2"]["nick"]["score"] is None and "nickname" in scores["item-2"]["nick"]["error"]
    assert scores["item-1"]["ratio"]["score"] == 1.0  # exact/fuzzy = 1/1 for Paris
    assert "division by zero" in scores["item-2"]["ratio"]["error"]  # 0/0 for Lyon, this item only
    assert scores["item-2"]["tone"]["passed"] is False and scores["item-2"]["fuzzy"]["score"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(("change", "message"), [
    (lambda e: e.update(data_source_config={"type": "custom", "item_schema": {
        "type": "object", "properties": {"grade": {"type": "integer"}}, "required": ["grade"]}}),
     "eval.json: item 1 (item-1).grade: '14' is not of type 'integer'"),
    (lambda e: e["testing_criteria"][0].update(reference="{{item.refrence}}"),
     "eval.json: $.testing_criteria[0] ('exact'): {{item.refrence}}: no item has a field 'refrence'"),
])
def test_items_are_checked_against_the_item_schema_and_the_graders_at_import(
        change: Any, message: str, tmp_path: Path) -> None:
    evaluation = eval_object()
    change(evaluation)
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    items = [{**ITEMS[0], "grade": "14"}, ITEMS[1]]
    (tmp_path / "run.json").write_text(json.dumps(run_object(
        {"type": "file_content", "content": [{"item": item} for item in items]})))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert done.returncode == 2 and not (tmp_path / "reg").exists()
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: {message}"), line


def test_a_run_reports_in_openais_own_shapes(ran: tuple[Path, Any]) -> None:
    """Issue 49, item 5: ``--format openai`` writes output items and a run summary the SDK's own
    types parse, with every criterion's result as the store holds it."""
    root, _ = ran
    conn = sqlite3.connect(root / "s.db")
    (run_id,) = conn.execute("select run_id from runs").fetchone()
    conn.close()
    done = run_cli("report", run_id, "--store", str(root / "s.db"), "--format", "openai", "--out", "oa",
                   cwd=root)
    assert done.returncode == 0, done.stderr
    items = [OutputItemListResponse.model_validate(json.loads(line))
             for line in (root / "oa" / "openai_output_items.jsonl").read_text().splitlines()]
    assert [(i.datasource_item_id, i.status) for i in items] == [(0, "pass"), (1, "fail")]
    assert items[1].datasource_item == ITEMS[1]  # the item as the export had it
    by_name = {r.name: (r.type, r.score, r.passed) for r in items[1].results}
    assert by_name["quality"] == ("score_model", 3.0, False)
    assert by_name["exact"] == ("string_check", 0.0, False)
    assert items[0].sample.output[0].content == "Paris" and items[0].sample.usage.total_tokens > 0
    run = json.loads((root / "oa" / "openai_run.json").read_text())
    assert ResultCounts.model_validate(run["result_counts"]).model_dump() == {
        "total": 2, "passed": 1, "failed": 1, "errored": 0}
    criteria = {c["testing_criteria"]: (c["passed"], c["failed"])
                for c in run["per_testing_criteria_results"]}
    assert criteria["exact"] == (1, 1) and criteria["short_and_right"] == (1, 1)


@pytest.mark.slow
def test_a_responses_run_imports_onto_the_responses_api(tmp_path: Path) -> None:
    """Issue 49, item 4: a run sampled through the Responses API (its structured output in
    ``sampling_params.text.format``) imports, and its commands name ``service.api=responses``."""
    run = run_object({"type": "file_content", "content": [{"item": item} for item in ITEMS]})
    run["data_source"] = {
        "type": "responses", "model": "gpt-4.1-mini",
        "source": run["data_source"]["source"],
        "input_messages": {"type": "template", "template": [
            {"role": "user", "content": "{{item.question}} Reply with exactly {{item.answer}}."}]},
        "sampling_params": {"temperature": 0, "text": {"format": {
            "type": "json_schema", "name": "city", "schema": {"type": "object"}, "strict": True}}}}
    RunRetrieveResponse.model_validate(run)  # the SDK's own type of such a run
    (tmp_path / "eval.json").write_text(json.dumps(eval_object()))
    (tmp_path / "run.json").write_text(json.dumps(run))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert all("service.api=responses" in line for line in done.stdout.splitlines() if "python -m" in line)
    spec = json.loads((tmp_path / "reg/evals/openai/capitals_qa.json").read_text())
    assert spec["params"]["response_format"]["json_schema"]["name"] == "city"
    assert spec["matcher"]["output_json"] is True  # a structured-output run fills sample.output_json


@pytest.mark.slow
def test_a_jsonl_run_is_graded_from_its_recorded_samples(tmp_path: Path) -> None:
    """Issue 49, item 4: a ``jsonl`` run's rows carry the outputs already (``sample``): they import
    with them, and ``service=recorded`` grades them without sampling again."""
    rows = [{"item": ITEMS[0], "sample": {"output_text": "Paris", "model": "gpt-4o-mini",
                                          "usage": {"prompt_tokens": 12, "completion_tokens": 1}}},
            {"item": ITEMS[1], "sample": {"output_text": "Lyon", "model": "gpt-4o-mini"}}]
    run = run_object({"type": "file_content", "content": rows})
    run["data_source"] = {"type": "jsonl", "source": {"type": "file_content", "content": rows}}
    RunRetrieveResponse.model_validate(run)
    evaluation = eval_object()
    kept = ("exact", "fuzzy")
    evaluation["testing_criteria"] = [c for c in evaluation["testing_criteria"] if c["name"] in kept]
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    (tmp_path / "run.json").write_text(json.dumps(run))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (command,) = [x.split(": ", 1)[1] for x in done.stdout.splitlines() if "recorded outputs" in x]
    assert command.endswith("service=recorded")
    ran = run_cli(*shlex.split(command)[3:], f"store.path={tmp_path / 's.db'}", "run.progress=false",
                  cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    conn = sqlite3.connect(tmp_path / "s.db")
    got = conn.execute("select case_id, output, passed, reply_model, prompt_tokens from results"
                       " order by case_id").fetchall()
    assert got == [("item-1", "Paris", 1, "gpt-4o-mini", 12), ("item-2", "Lyon", 0, "gpt-4o-mini", 0)]
    conn.close()


def test_each_criterion_is_in_the_aiwg_records_too(ran: tuple[Path, Any]) -> None:
    """Issue 49, item 5: ``results.jsonl`` holds each criterion's score (scaled to [0, 1]) as its
    rubric scores, and ``summary.json`` each criterion's figures."""
    root, _ = ran
    lines = [json.loads(x) for x in (root / "out" / "results.jsonl").read_text().splitlines()]
    by_case = {line["case_id"]: line["rubric_scores"] for line in lines}
    assert by_case["item-2"]["quality"] == pytest.approx(0.3) and by_case["item-1"]["exact"] == 1.0
    summary = json.loads((root / "out" / "summary.json").read_text())
    quality = next(g for g in summary["graders"] if g["grader"] == "quality")
    assert (quality["n"], quality["passed"]) == (2, 1)


@pytest.mark.slow
def test_a_data_file_of_produced_outputs_is_graded_as_recorded(tmp_path: Path) -> None:
    """``--data`` rows that carry a ``sample`` are outputs produced already: graded, never sent."""
    evaluation = eval_object()
    evaluation["testing_criteria"] = [c for c in evaluation["testing_criteria"] if c["name"] == "exact"]
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    rows = [{"item": ITEMS[0], "sample": {"choices": [{"message": {"content": "Paris"}}]}},
            {"item": ITEMS[1], "sample": {"output": [{"role": "assistant", "content": "Paris"}]}}]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = run_cli("import", "openai-evals", "eval.json", "--data", "items.jsonl", "--out", "reg",
                   cwd=tmp_path)
    assert done.returncode == 0 and "service=recorded" in done.stdout, done.stdout + done.stderr
    ran = run_cli("registry=reg", "eval=openai.capitals_qa", "service=recorded",
                  f"store.path={tmp_path / 's.db'}", "run.progress=false", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    conn = sqlite3.connect(tmp_path / "s.db")
    assert conn.execute("select output, passed from results order by case_id").fetchall() == [
        ("Paris", 1), ("Paris", 1)]
    conn.close()


@pytest.mark.slow
def test_a_template_reaching_into_python_scores_as_an_error_and_the_model_stays_one_word(
        tmp_path: Path) -> None:
    """Issue 59, R7: ``{{item.question.__class__.__init__.__globals__}}`` never reaches Python's
    attributes (each case's criterion errors, every report is written); a model name with shell
    syntax is printed quoted, one argument."""
    evaluation = eval_object()
    evaluation["testing_criteria"][0]["reference"] = "{{item.question.__class__.__init__.__globals__}}"
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    run = run_object({"type": "file_content", "content": [{"item": item} for item in ITEMS]})
    run["data_source"]["model"] = run["model"] = "gpt-4o; touch h4-PWNED #"
    (tmp_path / "run.json").write_text(json.dumps(run))
    done = run_cli("import", "openai-evals", "eval.json", "run.json", "--out", "reg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (printed,) = [line for line in done.stdout.splitlines() if "on its model:" in line]
    assert shlex.split(printed.split(": ", 1)[1])[6] == 'service.model="gpt-4o; touch h4-PWNED #"'
    ran = run_cli("registry=reg", "eval=openai.capitals_qa", f"store.path={tmp_path / 's.db'}",
                  "report=[json,md,html]", "run.progress=false", cwd=tmp_path)
    assert ran.returncode in (0, 1) and "Traceback" not in ran.stderr, ran.stderr[-3000:]
    assert "'__class__' is not in the item" in ran.stdout and not (tmp_path / "h4-PWNED").exists()
    assert "exact" in ran.stdout.split("graders (each testing criterion", 1)[1]
