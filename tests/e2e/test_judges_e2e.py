"""Issue 4 end to end: every matcher kind, judges, rubric evaluators, the refinement loop
and custom matchers, through the mock service (in-process or as its own process) into
the store.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

from evalhydra.cli.jobs import run_config
from evalhydra.compose.compose import compose_config
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.run import run_plan
from evalhydra.matchers.prompts import parse_prompt
from evalhydra.matchers.rubric import refinement_input
from evalhydra.plan.build import build_plan
from evalhydra.registry.definitions import default_registry_root, load_registry
from evalhydra.services.mock.replies import reply_for, usage_for
from tests.conftest import AIWG_FIXTURE, ZIG_FIXTURE, smoke_eval, write_registry
from tests.helpers import chat_requests, mock_call, mock_process

Compose = Callable[..., DictConfig]
Rows = dict[tuple[str, str], dict[str, Any]]
JSON_COLUMNS = ("details", "rubric_scores", "attempt_history", "tool_calls")


def stored_rows(db: Path, run_id: str | None = None) -> Rows:
    """The results of one run (default: the latest) keyed by (eval_id, case_id), JSON decoded."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        if run_id is None:
            run_id = conn.execute("select run_id from runs order by started_at desc limit 1").fetchone()[0]
        found = conn.execute("select r.* from run_cells rc join results r on r.cell_key = rc.cell_key "
                             "where rc.run_id = ?", [run_id]).fetchall()
    finally:
        conn.close()
    rows = {}
    for raw in found:
        row = dict(raw)
        for column in JSON_COLUMNS:
            if row[column] is not None:
                row[column] = json.loads(row[column])
        rows[(row["eval_id"], row["case_id"])] = row
    return rows


def attempt_calls(db: Path, cell_key: str) -> list[tuple[str, int]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("select call, attempt from attempts where cell_key = ? order by call, attempt",
                            [cell_key]).fetchall()
    finally:
        conn.close()


def run(compose: Compose, tmp_path: Path, *overrides: str) -> Rows:
    """build_plan + run_plan (the mock service and mock judges start in-process)."""
    plan = build_plan(compose(*overrides), list(overrides))
    assert run_plan(plan, output_dir=tmp_path / "report") == 0
    return stored_rows(plan.store_path)


# -- 11: every matcher kind, end to end ---------------------------------------------------


@pytest.fixture(scope="module")
def matcher_rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rows]:
    """One run of the packaged ``matchers`` group: one small eval per matcher kind."""
    tmp = tmp_path_factory.mktemp("matchers")
    overrides = [f"registry={default_registry_root()}", "eval=matchers"]
    cfg = compose_config([*overrides, f"store.path={tmp / 'store.db'}", "run.progress=false"])
    assert run_plan(build_plan(cfg, overrides), output_dir=tmp / "report") == 0
    yield stored_rows(tmp / "store.db")
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()


NO_IDEAL_MATCH = "output did not exactly match ideal"
# (eval, case) -> passed, score, failure_reason
MATCHER_TABLE: list[tuple[str, str, bool, float, str | None]] = [
    ("exact_match", "pass-case-folded", True, 1.0, None),
    ("exact_match", "fail-different", False, 0.0, NO_IDEAL_MATCH),
    ("exact_match", "fail-blank-ideal", False, 0.0, "missing ideal"),
    ("includes", "pass-included", True, 1.0, None),
    ("includes", "fail-case", False, 0.0, "output did not include ideal"),
    ("regex", "pass-word", True, 1.0, None),
    ("regex", "fail-not-a-word", False, 0.0, "output did not match pattern"),
    ("regex", "fail-no-ideal", False, 0.0, "missing ideal"),
    ("json_schema", "pass-valid", True, 1.0, None),
    ("json_schema", "fail-enum", False, 0.0,
     "schema violation at $.answer: 'NOPE' is not one of ['OK', 'READY']"),
    ("json_schema", "fail-not-json", False, 0.0, "invalid json output"),
    ("json_fields", "pass-field", True, 1.0, None),
    ("json_fields", "fail-missing-field", False, 0.0, "missing required json field"),
    ("json_fields", "fail-array", False, 0.0, "json output is not an object"),
    ("json_fields", "fail-not-json", False, 0.0, "invalid json output"),
    ("tool_call", "pass-call", True, 1.0, None),
    ("tool_call", "fail-argument", False, 0.0, "tool argument value mismatch"),
    ("tool_call", "fail-wrong-name", False, 0.0, "wrong tool name"),
    ("tool_call", "fail-no-call", False, 0.0, "missing tool call"),
    ("model_grade", "pass-matches-ideal", True, 1.0, None),
    ("model_grade", "fail-wrong-answer", False, 0.0, "Candidate output does not match the ideal answer."),
    ("model_grade", "pass-no-ideal", True, 1.0, None),
    ("rubric", "pass-first-attempt", True, 1.0, None),
    ("rubric", "pass-after-refinement", True, 1.0, None),
    ("rubric", "fail-every-attempt", False, 0.3, "Output is empty"),
    ("all_of", "pass-both", True, 1.0, None),
    ("all_of", "fail-too-long", False, 0.0, "part 2 (regex): output did not match pattern"),
    ("any_of", "pass-exact", True, 1.0, None),
    ("any_of", "pass-json", True, 1.0, None),
    ("any_of", "fail-neither", False, 0.0, "no part passed: part 1 (exact_match): " + NO_IDEAL_MATCH
     + "; part 2 (json_fields): invalid json output"),
    ("weighted", "pass-both", True, 1.0, None),
    ("weighted", "fail-case-only-judge", False, 0.25,
     "weighted score 0.250 below threshold 0.750: part 1 (includes): output did not include ideal"),
    ("weighted", "fail-neither", False, 0.0,
     "weighted score 0.000 below threshold 0.750: part 1 (includes): output did not include ideal;"
     " part 2 (model_grade): Candidate output does not match the ideal answer."),
    ("custom_target", "pass-all-keywords", True, 1.0, None),
    ("custom_target", "fail-missing-keyword", False, 0.6667, "missing keywords: blue"),
    ("custom_validator", "excellent-short", True, 1.0, None),
    ("custom_validator", "pass-medium", True, 0.8, None),
    ("custom_validator", "fail-too-long", False, 0.0, "validator status FAIL; word_limit: 12 words > 8"),
    # five criteria; the cell's score is their mean, each scaled by its range (the judge's 9 of 10: 0.9)
    ("openai_graders", "pass-every-criterion", True, 0.98, None),
    ("openai_graders", "fail-wrong-and-rude", False, 0.13,
     "exact: eq failed: 'London' vs 'Paris'; short: score 0 < pass_threshold 0.5; judge_score: score 4 <"
     " pass_threshold 7; tone: label 'rude'; blend: score 0.25 < pass_threshold 0.5"),
]


def test_the_matchers_group_covers_every_kind_and_case(matcher_rows: Rows) -> None:
    from evalhydra.matchers import MATCHER_KINDS
    from evalhydra.matchers.trajectory import PATH_KINDS

    kinds = {row["eval_id"].split(".")[1] for row in matcher_rows.values()}
    custom = {"custom_target", "custom_validator"}
    # the path and state kinds need a tool loop, bfcl_ast a BFCL ground truth, tau2 a simulated user:
    # the tools and users groups (tools.order_desk, tools.bfcl_mini, users.order_desk_tau2) and
    # tests/tools run them
    assert (kinds - custom) | {"custom"} == set(MATCHER_KINDS) - set(PATH_KINDS) - {"bfcl_ast", "tau2"}
    assert set(matcher_rows) == {(f"matchers.{e}", c) for e, c, *_ in MATCHER_TABLE}


@pytest.mark.parametrize(("eval_name", "case", "passed", "score", "reason"), MATCHER_TABLE,
                         ids=[f"{e}-{c}" for e, c, *_ in MATCHER_TABLE])
def test_each_matcher_stores_its_verdict(matcher_rows: Rows, eval_name: str, case: str, passed: bool,
                                         score: float, reason: str | None) -> None:
    row = matcher_rows[(f"matchers.{eval_name}", case)]
    verdict = (bool(row["passed"]), row["score"], row["failure_reason"])
    assert verdict == (passed, pytest.approx(score), reason)
    assert row["status"] == ("PASS" if passed else "FAIL")
    assert row["error_kind"] is None


def test_deterministic_matchers_keep_their_details(matcher_rows: Rows) -> None:
    def details(eval_name: str, case: str) -> Any:
        return matcher_rows[(f"matchers.{eval_name}", case)]["details"]

    assert details("regex", "pass-word") == {"match": "PARIS"}
    assert details("json_schema", "fail-enum") == {"json_path": "$.answer", "validator": "enum"}
    assert details("json_fields", "fail-missing-field") == {"missing_fields": ["answer"]}
    assert matcher_rows[("matchers.tool_call", "pass-call")]["tool_calls"] == [
        {"name": "search_web", "arguments": '{"query":"weather melbourne"}'}]
    assert details("custom_target", "fail-missing-keyword") == {
        "found": ["red", "green"], "missing": ["blue"]}
    assert details("custom_validator", "excellent-short")["status"] == "EXCELLENT"
    assert details("custom_validator", "fail-too-long") == {"status": "FAIL", "checks": [
        {"name": "non_empty", "passed": True, "message": ""},
        {"name": "word_limit", "passed": False, "message": "12 words > 8"}]}


def test_composites_keep_every_part_in_details(matcher_rows: Rows) -> None:
    all_of = matcher_rows[("matchers.all_of", "fail-too-long")]["details"]["parts"]
    assert [(p["kind"], p["passed"], p["reason"]) for p in all_of] == [
        ("includes", True, None), ("regex", False, "output did not match pattern")]
    any_of = matcher_rows[("matchers.any_of", "pass-json")]["details"]["parts"]
    assert [(p["kind"], p["passed"]) for p in any_of] == [("exact_match", False), ("json_fields", True)]
    weighted = matcher_rows[("matchers.weighted", "fail-case-only-judge")]
    assert [(p["kind"], p["passed"], p["score"], p["weight"]) for p in weighted["details"]["parts"]] == [
        ("includes", False, 0.0, 3.0), ("model_grade", True, 1.0, 1.0)]
    # the judge part's call is accounted on the composite's row
    assert (weighted["judge_service"], weighted["judge_attempt_count"], weighted["attempt_count"]) == (
        "mock_judge", 1, 2)


def test_model_grade_rows_carry_the_judge_call(matcher_rows: Rows) -> None:
    for case in ("pass-matches-ideal", "fail-wrong-answer", "pass-no-ideal"):
        row = matcher_rows[("matchers.model_grade", case)]
        assert (row["judge_service"], row["judge_model"], row["judge_status_code"]) == (
            "mock_judge", "mock-judge", 200)
        assert (row["judge_attempt_count"], row["judge_retried"], row["attempt_count"], row["retried"]) == (
            1, 0, 2, 0)
        assert row["judge_prompt_tokens"] > 0 and row["judge_completion_tokens"] > 0
    failed = matcher_rows[("matchers.model_grade", "fail-wrong-answer")]
    assert failed["details"] == {"judge_passed": False,
                                 "judge_reason": "Candidate output does not match the ideal answer."}


def test_rubric_rows_store_the_evaluator_fields_and_the_loop(matcher_rows: Rows) -> None:
    first = matcher_rows[("matchers.rubric", "pass-first-attempt")]
    assert first["rubric_scores"] == {"relevance": 1.0, "completeness": 1.0, "accuracy": 1.0, "format": 1.0}
    assert (first["feedback"], first["failure_category"], first["suggested_fix"]) == ("", None, None)
    assert (first["attempts"], first["pass_threshold"]) == (1, 0.85)

    refined = matcher_rows[("matchers.rubric", "pass-after-refinement")]
    assert refined["attempts"] == 2 and refined["output"] == "Write a haiku about rain."
    assert refined["attempt_history"] == [
        {"attempt": 1, "output": "Write a BAD haiku about rain.", "score": 0.3, "pass": False,
         "feedback": "Output contains BAD content"},
        {"attempt": 2, "output": "Write a haiku about rain.", "score": 1.0, "pass": True, "feedback": ""}]
    assert refined["attempt_count"] == 4  # two generations, two evaluations

    failed = matcher_rows[("matchers.rubric", "fail-every-attempt")]
    assert (failed["attempts"], failed["attempt_count"]) == (3, 6)
    assert [h["attempt"] for h in failed["attempt_history"]] == [1, 2, 3]
    assert (failed["feedback"], failed["failure_category"], failed["suggested_fix"]) == (
        "Output is empty", "content", "Produce a non-empty output")
    assert set(failed["rubric_scores"].values()) == {0.3}


# -- 4: zig_eval's tools.search_web ---------------------------------------------------------


def test_zig_fixture_tool_eval_passes_against_the_mock(compose: Compose, tmp_path: Path) -> None:
    rows = run(compose, tmp_path, f"registry={ZIG_FIXTURE}", "service=local-product",
               "service.mock.enabled=true", "eval=tools")
    row = rows[("tools.search_web", "case-1")]
    assert (row["passed"], row["score"], row["failure_reason"], row["service_name"]) == (
        1, 1.0, None, "local-product")
    assert row["tool_calls"] == [{"name": "search_web", "arguments": '{"query":"weather melbourne"}'}]


# -- 5: model_grade through a judge process ---------------------------------------------------


def _judge_registry(root: Path, judge_url: str) -> Path:
    """Registry with a model_grade and a rubric eval (both naming mock_judge) and a judge_proc service."""
    services = [{"name": "judge_proc", "base_url": judge_url, "default_model": "proc-judge",
                 "timeout_ms": 10000, "retry": {"max_attempts": 2, "backoff_ms": 0}}]
    graded = smoke_eval("g.graded", "data/g/graded/test.jsonl", matcher={
        "kind": "model_grade", "judge_service": "mock_judge", "rubric": "Exact answer.", "pass_score": 0.5})
    rubric = smoke_eval("g.rubric", "data/g/rubric/test.jsonl", matcher={
        "kind": "rubric", "judge_service": "mock_judge", "prompt": "prompts/evaluator.prompt.md"})
    prompt = (AIWG_FIXTURE / "templates_simple-chain_evaluator.prompt.md").read_text()
    evals = {"g/graded.json": graded, "g/rubric.json": rubric}
    return write_registry(root, evals=evals, services=services, data={
        "data/g/graded/test.jsonl": '{"id":"c1","input":"Reply with exactly Paris.","ideal":"Paris"}\n',
        "data/g/rubric/test.jsonl": '{"id":"c1","input":"Describe a mug."}\n',
        "prompts/evaluator.prompt.md": prompt})


@pytest.fixture
def judge_url() -> Iterator[str]:
    with mock_process("--latency-ms", "150", "--fail-first-n", "1") as url:
        yield url


@pytest.mark.slow
def test_model_grade_records_the_judge_call_and_judge_service_overrides(
        compose: Compose, tmp_path: Path, judge_url: str) -> None:
    registry = _judge_registry(tmp_path / "reg", judge_url)
    rows = run(compose, tmp_path, f"registry={registry}", "eval=g.graded", "judge_service=judge_proc")
    row = rows[("g.graded", "c1")]
    assert (row["passed"], row["score"], row["judge_service"], row["judge_model"]) == (
        1, 1.0, "judge_proc", "proc-judge")
    # the judge failed once (500) and was retried; the candidate answered at once
    assert (row["judge_attempt_count"], row["judge_retried"], row["judge_status_code"]) == (2, 1, 200)
    assert (row["attempt_count"], row["retried"]) == (3, 1)
    assert row["latency_ms"] >= 150  # the judge's latency is part of the cell's
    assert attempt_calls(tmp_path / "store.db", row["cell_key"]) == [
        ("candidate", 1), ("judge", 1), ("judge", 2)]
    assert chat_requests(judge_url) == 2

    # judge_service= replaces the judge of every eval (model_grade and rubric alike) …
    rows = run(compose, tmp_path, f"registry={registry}", "eval=g", "judge_service=judge_proc",
               f"store.path={tmp_path / 'override.db'}")
    assert {k: (r["judge_service"], r["passed"]) for k, r in rows.items()} == {
        ("g.graded", "c1"): ("judge_proc", 1), ("g.rubric", "c1"): ("judge_proc", 1)}
    assert chat_requests(judge_url) == 2 + 2
    # … and without it each eval uses its own judge (the in-process mock_judge)
    rows = run(compose, tmp_path, f"registry={registry}", "eval=g", f"store.path={tmp_path / 'own.db'}")
    assert {r["judge_service"] for r in rows.values()} == {"mock_judge"}
    assert chat_requests(judge_url) == 4


def test_unknown_judge_fails_before_any_call_listing_the_services(
        compose: Compose, tmp_path: Path, judge_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    registry = _judge_registry(tmp_path / "reg", judge_url)
    overrides = [f"registry={registry}", "eval=g", "service=mock", "service.mock.enabled=false",
                 f"service.base_url={judge_url}", "judge_service=nope"]
    assert run_config(compose(*overrides), overrides=overrides) == 2
    err = capsys.readouterr().err
    assert "Judge service 'nope' not found (JudgeServiceNotFound)" in err
    assert "judge_proc" in err and "mock_judge" in err
    assert chat_requests(judge_url) == 0
    assert not (tmp_path / "store.db").exists()


# -- 6: rubric with the aiwg fixture prompts ----------------------------------------------------


SIMPLE_CHAIN_WEIGHTS = {"format": 0.25, "completeness": 0.35, "accuracy": 0.30, "no_hallucination": 0.10}


def _aiwg_registry(root: Path) -> Path:
    cases = (AIWG_FIXTURE / "templates_simple-chain_eval_cases.jsonl").read_text()
    extra = ('{"id": "case_bad", "input": "BAD Widget 12V, red"}\n'
             '{"id": "case_fenced", "input": "Widget 5V, green MOCK_FENCE"}\n')

    def rubric(eval_id: str, prompt: str, **matcher: Any) -> dict[str, Any]:
        return smoke_eval(eval_id, "data/aiwg/cases.jsonl", matcher={
            "kind": "rubric", "judge_service": "mock_judge", "prompt": prompt, **matcher})

    root = write_registry(root, data={"data/aiwg/cases.jsonl": cases + extra}, evals={
        "aiwg/simple_chain.json": rubric("aiwg.simple_chain", "prompts/simple_chain.prompt.md",
                                         weights=SIMPLE_CHAIN_WEIGHTS, pass_threshold=0.85),
        "aiwg/eval_loop.json": rubric("aiwg.eval_loop", "prompts/eval_loop.prompt.md"),
        "aiwg/unreported.json": rubric("aiwg.unreported", "prompts/simple_chain.prompt.md",
                                       weights={"format": 1, "tone": 1}),
        "aiwg/lenient.json": rubric("aiwg.lenient", "prompts/simple_chain.prompt.md", pass_threshold=0.25),
        "bad/contaminated.json": rubric("bad.contaminated", "prompts/contaminated.prompt.md"),
    })
    (root / "prompts").mkdir()
    for name, fixture in (("simple_chain", "simple-chain"), ("eval_loop", "eval-loop")):
        source = AIWG_FIXTURE / f"templates_{fixture}_evaluator.prompt.md"
        shutil.copy(source, root / f"prompts/{name}.prompt.md")
    clean = (AIWG_FIXTURE / "templates_eval-loop_evaluator.prompt.md").read_text()
    (root / "prompts/contaminated.prompt.md").write_text(
        clean.replace("Generated output:", "Generator reasoning:\n{{chain_of_thought}}\n\nGenerated output:"))
    return root


def test_rubric_with_the_aiwg_prompts_against_the_mock_judge(compose: Compose, tmp_path: Path) -> None:
    registry = _aiwg_registry(tmp_path / "reg")
    rows = run(compose, tmp_path, f"registry={registry}", "eval=aiwg")
    fixture_cases = ["case_001", "case_002", "case_003", "case_004", "case_005", "case_fenced"]
    for eval_id in ("aiwg.simple_chain", "aiwg.eval_loop"):
        for case in fixture_cases:
            row = rows[(eval_id, case)]
            verdict = (row["passed"], row["score"], row["feedback"], row["failure_category"])
            assert verdict == (1, 1.0, "", None)
            assert row["suggested_fix"] is None and set(row["rubric_scores"].values()) == {1.0}
        bad = rows[(eval_id, "case_bad")]
        assert (bad["passed"], bad["score"], bad["failure_reason"]) == (
            0, pytest.approx(0.3), "Output contains BAD content")
        assert (bad["feedback"], bad["failure_category"], bad["suggested_fix"]) == (
            "Output contains BAD content", "content", "Remove BAD content")
    assert set(rows[("aiwg.simple_chain", "case_001")]["rubric_scores"]) == set(SIMPLE_CHAIN_WEIGHTS)
    assert set(rows[("aiwg.eval_loop", "case_001")]["rubric_scores"]) == {
        "relevance", "completeness", "accuracy", "format"}
    # a weighted criterion the evaluator did not score counts 0: 0.5 fails although the reply says pass
    unreported = rows[("aiwg.unreported", "case_001")]
    assert (unreported["passed"], unreported["score"]) == (0, 0.5)
    assert unreported["details"]["evaluator_pass"] is True
    assert unreported["failure_reason"] == "score 0.500 below pass threshold 0.850"
    # the verdict is score >= pass_threshold, whatever the reply's "pass"
    lenient = rows[("aiwg.lenient", "case_bad")]
    assert (lenient["passed"], lenient["score"], lenient["details"]["evaluator_pass"]) == (1, 0.3, False)
    assert (lenient["feedback"], lenient["failure_category"], lenient["pass_threshold"]) == ("", None, 0.25)


def test_a_contaminated_evaluator_prompt_is_refused_at_load_time(compose: Compose, tmp_path: Path) -> None:
    registry = _aiwg_registry(tmp_path / "reg")
    with pytest.raises(EvalHydraError, match=r"references generator context \(\{\{chain_of_thought\}\}\)"):
        build_plan(compose(f"registry={registry}", "eval=bad"))


# -- 7: the refinement loop ------------------------------------------------------------------


def test_refinement_loop_regenerates_with_feedback_and_sums_every_call(
        compose: Compose, tmp_path: Path) -> None:
    case_input = "ACME BAD Widget Pro, 48V, blue"
    prompt_file = AIWG_FIXTURE / "templates_simple-chain_evaluator.prompt.md"
    with mock_process() as cand_url, mock_process() as judge_url:
        services = [{"name": "judge_proc", "base_url": judge_url, "default_model": "proc-judge",
                     "timeout_ms": 10000, "pricing": {"input_per_mtok": 1.0, "output_per_mtok": 3.0}}]
        spec = smoke_eval("loop.refine", "data/loop/cases.jsonl", max_attempts=3, matcher={
            "kind": "rubric", "judge_service": "judge_proc", "prompt": "prompts/evaluator.prompt.md",
            "weights": SIMPLE_CHAIN_WEIGHTS})
        registry = write_registry(tmp_path / "reg", evals={"loop/refine.json": spec}, services=services,
                                  data={"data/loop/cases.jsonl": json.dumps({"id": "c1",
                                                                             "input": case_input}),
                                        "prompts/evaluator.prompt.md": prompt_file.read_text()})
        rows = run(compose, tmp_path, f"registry={registry}", "eval=loop.refine", "service=mock",
                   "service.mock.enabled=false", f"service.base_url={cand_url}",
                   "service.pricing.input_per_mtok=2.0", "service.pricing.output_per_mtok=4.0")
        last_candidate = mock_call(cand_url, "last")
        last_judge = mock_call(judge_url, "last")
        assert (chat_requests(cand_url), chat_requests(judge_url)) == (2, 2)

    refined_prompt = ("Previous attempt was insufficient. Feedback: Output contains BAD content\n\n"
                      f"Original request: {case_input}")
    assert refined_prompt == refinement_input("Output contains BAD content", case_input)
    assert last_candidate["messages"] == [{"role": "user", "content": refined_prompt}]
    # the evaluator sees the original input and the new output, never the refinement prompt
    judge_user = last_judge["messages"][-1]["content"]
    assert f"Input provided to the generator:\n{case_input}\n" in judge_user
    assert "Output produced by the generator:\nACME Widget Pro, 48V, blue\n" in judge_user
    assert "Previous attempt" not in json.dumps(last_judge)

    row = rows[("loop.refine", "c1")]
    outputs = [case_input, "ACME Widget Pro, 48V, blue"]
    assert (row["passed"], row["attempts"], row["output"]) == (1, 2, outputs[1])
    assert row["attempt_history"] == [
        {"attempt": 1, "output": outputs[0], "score": 0.3, "pass": False,
         "feedback": "Output contains BAD content"},
        {"attempt": 2, "output": outputs[1], "score": 1.0, "pass": True, "feedback": ""}]
    # every call's tokens and cost: two generations, two evaluations
    prompt_tokens = math.ceil(len(case_input) / 4) + math.ceil(len(refined_prompt) / 4)
    completion_tokens = sum(math.ceil(len(o) / 4) for o in outputs)
    assert (row["prompt_tokens"], row["completion_tokens"]) == (prompt_tokens, completion_tokens)
    assert row["cost_usd"] == pytest.approx((prompt_tokens * 2.0 + completion_tokens * 4.0) / 1e6)
    prompt = parse_prompt(prompt_file.read_text(), "evaluator")
    judge_usage = [_judge_usage(prompt.render({"input": case_input, "output": o})) for o in outputs]
    judge_prompt = sum(u["prompt_tokens"] for u in judge_usage)
    judge_completion = sum(u["completion_tokens"] for u in judge_usage)
    assert (row["judge_prompt_tokens"], row["judge_completion_tokens"]) == (judge_prompt, judge_completion)
    assert row["judge_cost_usd"] == pytest.approx((judge_prompt * 1.0 + judge_completion * 3.0) / 1e6)
    assert row["attempt_count"] == 4
    assert attempt_calls(tmp_path / "store.db", row["cell_key"]) == [
        ("candidate1", 1), ("candidate2", 1), ("judge1", 1), ("judge2", 1)]


def _judge_usage(rendered: tuple[str | None, str]) -> dict[str, Any]:
    system, user = rendered
    payload = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
    return usage_for(payload, reply_for(payload))


def test_max_attempts_in_yaml_with_a_deterministic_matcher(compose: Compose, tmp_path: Path) -> None:
    registry = write_registry(tmp_path / "reg", evals={}, data={
        "data/loop/cases.jsonl": '{"id":"c1","input":"Reply with exactly no.","ideal":"yes"}\n',
        "evals/loop/exact.yaml": textwrap.dedent("""\
            id: loop.exact
            group: loop
            description: exact_match with two attempts
            dataset_path: data/loop/cases.jsonl
            split: test
            default_run_count: 1
            max_attempts: 2
            matcher: {kind: exact_match}
            """)})
    plan = build_plan(compose(f"registry={registry}", "eval=loop.exact"))
    assert plan.evals[0].refinement_attempts == 2
    rows = run(compose, tmp_path, f"registry={registry}", "eval=loop.exact")
    row = rows[("loop.exact", "c1")]
    assert (row["passed"], row["attempts"], row["attempt_count"]) == (0, 2, 2)
    assert [h["feedback"] for h in row["attempt_history"]] == [NO_IDEAL_MATCH] * 2
    assert attempt_calls(tmp_path / "store.db", row["cell_key"]) == [("candidate1", 1), ("candidate2", 1)]
    bad = shutil.copytree(registry, tmp_path / "bad")
    (bad / "evals/loop/exact.yaml").write_text(
        (bad / "evals/loop/exact.yaml").read_text().replace("max_attempts: 2", "max_attempts: 11"))
    with pytest.raises(EvalHydraError, match=r"exact\.yaml: max_attempts must be an integer in 1\.\.10"):
        load_registry(bad).eval("loop.exact")


# -- 8: custom matchers ------------------------------------------------------------------------


CUSTOM_MODULE = textwrap.dedent(
    """
    def inspect_context(ctx, marker="RAISE"):
        if marker in ctx.output:
            raise ValueError(f"refusing output {ctx.output!r}")
        return {
            "passed": True,
            "score": 1.0,
            "details": {
                "case_id": ctx.case.id,
                "ideal": ctx.case.ideal,
                "output": ctx.output,
                "tool_calls": [[c.name, c.arguments] for c in ctx.tool_calls],
                "trace": ctx.trace,
            },
        }


    class MinLength:
        def __init__(self, chars):
            self.chars = chars

        def __call__(self, ctx):
            ok = len(ctx.output) >= self.chars
            return {"passed": ok, "score": 1.0 if ok else 0.0, "reason": f"shorter than {self.chars}"}
    """
)


def test_custom_targets_see_case_output_tool_calls_and_a_raise_is_an_error_result(
        compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "e2e_custom_targets.py").write_text(CUSTOM_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    tool = {"name": "search_web", "description": "Search the web.", "parameters_json": json.dumps(schema)}
    fn = {"kind": "custom", "_target_": "e2e_custom_targets.inspect_context"}
    cls = {"kind": "custom", "_target_": "e2e_custom_targets.MinLength", "kwargs": {"chars": 5}}
    registry = write_registry(tmp_path / "reg", evals={
        "c/fn.json": smoke_eval("c.fn", "data/c/fn.jsonl", matcher=fn, tools=[tool]),
        "c/cls.json": smoke_eval("c.cls", "data/c/cls.jsonl", matcher=cls),
    }, data={
        "data/c/fn.jsonl": '{"id":"tool","input":"Search the web for cats.","ideal":"cats"}\n'
                           '{"id":"raises","input":"Reply with exactly RAISE now."}\n'
                           '{"id":"text","input":"Reply with exactly fine."}\n',
        "data/c/cls.jsonl": '{"id":"long","input":"Reply with exactly long enough."}\n'
                            '{"id":"short","input":"Reply with exactly hi."}\n',
    })
    rows = run(compose, tmp_path, f"registry={registry}", "eval=c")
    assert rows[("c.fn", "tool")]["details"] == {
        "case_id": "tool", "ideal": "cats", "output": "", "tool_calls": [["search_web", '{"query":"cats"}']],
        "trace": None}
    raised = rows[("c.fn", "raises")]
    assert (raised["status"], raised["passed"], raised["score"], raised["error_kind"]) == (
        "FAIL", 0, 0.0, None)  # scored: the output counts against the pass rate
    assert raised["failure_reason"] == "the matcher raised ValueError: refusing output 'RAISE now'"
    # the run went on: every other cell was scored
    assert [(k, r["status"]) for k, r in sorted(rows.items()) if k != ("c.fn", "raises")] == [
        (("c.cls", "long"), "PASS"), (("c.cls", "short"), "FAIL"), (("c.fn", "text"), "PASS"),
        (("c.fn", "tool"), "PASS")]
    assert rows[("c.cls", "short")]["failure_reason"] == "shorter than 5"
