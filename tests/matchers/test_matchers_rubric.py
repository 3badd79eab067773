"""rubric (aiwg evaluator): prompt files, isolation, computed scores, reply parsing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, ErrorKind
from evalhydra.matchers import MatchContext, build_matcher, refinement_input, validate_matcher
from evalhydra.matchers.prompts import contamination_markers, parse_prompt, render
from evalhydra.matchers.rubric import evaluate_reply, parse_evaluator_reply, rubric_score
from evalhydra.testing.judges import ScriptedJudge, judge_error, judge_reply
from tests.conftest import AIWG_FIXTURE

FIXTURES = AIWG_FIXTURE
SIMPLE = "prompts/simple-chain.evaluator.prompt.md"
LOOP = "prompts/eval-loop.evaluator.prompt.md"
WEIGHTS = {"format": 0.25, "completeness": 0.35, "accuracy": 0.30, "no_hallucination": 0.10}
INPUT = "ACME Widget Pro 2.0 — 48V, 10A, blue, $29.99/unit, min order 50"


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    (tmp_path / "prompts").mkdir()
    shutil.copy(FIXTURES / "templates_simple-chain_evaluator.prompt.md", tmp_path / SIMPLE)
    shutil.copy(FIXTURES / "templates_eval-loop_evaluator.prompt.md", tmp_path / LOOP)
    return tmp_path


def spec(prompt: str = SIMPLE, **extra: object) -> dict:
    return {"kind": "rubric", "judge_service": "judge", "prompt": prompt, **extra}


def reply(**fields: object) -> str:
    base = {
        "score": 0.5,
        "pass": False,
        "feedback": "Field 'color' missing",
        "rubric_scores": {"format": 1.0, "completeness": 0.6, "accuracy": 0.9, "no_hallucination": 1.0},
        "failure_category": "missing_field",
        "suggested_fix": "Add 'color' to the fields.",
    }
    return json.dumps({**base, **fields})


def context(output: str = '{"name": "Widget Pro 2.0"}') -> MatchContext:
    case = Case(id="case_001", input=INPUT, expected={"name": "Widget Pro 2.0", "color": "blue"})
    return MatchContext(case=case, output=output)


def test_refinement_input_is_exact() -> None:
    assert refinement_input("Add colour.", "Extract it") == (
        "Previous attempt was insufficient. Feedback: Add colour.\n\nOriginal request: Extract it"
    )


async def test_request_uses_sections_and_only_input_and_output(registry: Path) -> None:
    judge = ScriptedJudge([reply()])
    matcher = build_matcher(spec(judge_model="eval-model"), registry_root=registry, judges=judge)
    await matcher(context('{"name": "{{input}}"}'))
    [(service, request)] = judge.calls
    assert service == "judge"
    assert request.model == "eval-model"
    assert request.system_prompt is not None
    assert request.system_prompt.startswith("You are a strict output evaluator.")
    assert request.system_prompt.endswith('set `feedback` to "" and `failure_category` to null.')
    # one-pass substitution: the output's own {{input}} is not expanded
    assert request.user_content == (
        f"Input provided to the generator:\n{INPUT}\n\n"
        'Output produced by the generator:\n{"name": "{{input}}"}\n\nScore the output.'
    )
    assert 'blue"' not in request.user_content  # `expected` never reaches the evaluator
    assert request.params == {"max_tokens": 256, "temperature": 0.0}


async def test_both_fixture_prompts_load(registry: Path) -> None:
    for prompt in (SIMPLE, LOOP):
        assert validate_matcher(spec(prompt), "m", registry_root=registry)["pass_threshold"] == 0.85


@pytest.mark.parametrize(
    ("weights", "rubric_scores", "score"),
    [
        (WEIGHTS, {"format": 1, "completeness": 1, "accuracy": 1, "no_hallucination": 1}, 1.0),
        (WEIGHTS, {"format": 1.0, "completeness": 0.6, "accuracy": 0.9, "no_hallucination": 1.0}, 0.83),
        # a criterion missing from the reply counts 0
        (WEIGHTS, {"format": 1.0, "completeness": 1.0, "accuracy": 1.0}, 0.9),
        # extra criteria are stored but do not count
        ({"a": 1.0, "b": 3.0}, {"a": 1.0, "b": 0.0, "z": 1.0}, 0.25),
    ],
)
def test_weighted_score(weights: dict, rubric_scores: dict, score: float) -> None:
    scored = rubric_score({"score": 0.0, "rubric_scores": rubric_scores}, weights)
    assert scored is not None and scored[0] == pytest.approx(score)
    assert scored[1] == {k: float(v) for k, v in rubric_scores.items()}


@pytest.mark.parametrize(
    ("fields", "score"),
    [
        ({"score": 0.7}, 0.7),
        ({"score": 1}, 1.0),
        ({"rubric_scores": {"a": 0.5, "b": 1.0}}, 0.75),
        ({}, None),
        ({"score": 1.2}, None),
        ({"score": "0.9"}, None),
        ({"score": 0.9, "rubric_scores": {"a": 2}}, None),
        ({"score": 0.9, "rubric_scores": [1]}, None),
    ],
)
def test_unweighted_score(fields: dict, score: float | None) -> None:
    scored = rubric_score(fields, None)
    assert (scored[0] if scored else None) == score


def test_weights_need_rubric_scores() -> None:
    assert rubric_score({"score": 0.9}, {"a": 1.0}) is None


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ('{"score": 1}', {"score": 1}),
        ('  \n```json\n{"score": 1}\n```\n', {"score": 1}),
        ('```\n{"score": 1}', {"score": 1}),
        ('```json\n{"score": 1}\n```\ntrailing', None),
        ("[1]", None),
        ("score: 1", None),
    ],
)
def test_parse_evaluator_reply(text: str, parsed: dict | None) -> None:
    assert parse_evaluator_reply(text) == parsed


def test_pass_is_computed_not_trusted() -> None:
    # the evaluator says pass at 0.83, but 0.83 < 0.85
    result = evaluate_reply(json.loads(reply(score=0.83, **{"pass": True})), None, 0.85)
    assert result is not None and not result.passed
    assert result.details == {"evaluator_score": 0.83, "evaluator_pass": True, "pass_threshold": 0.85}
    # and a "fail" at 0.9 passes
    result = evaluate_reply(json.loads(reply(score=0.9)), None, 0.85)
    assert result is not None and result.passed


@pytest.mark.parametrize(
    ("fields", "category", "fix", "reason"),
    [
        ({}, "missing_field", "Add 'color' to the fields.", "Field 'color' missing"),
        (
            {"failure_category": "constraint_violation"},
            "constraint_violation",
            "Add 'color' to the fields.",
            None,
        ),
        ({"failure_category": "vibes"}, "other", "Add 'color' to the fields.", None),
        ({"failure_category": None, "suggested_fix": None}, "other", None, None),
        ({"suggested_fix": "  "}, "missing_field", None, None),
        (
            {"feedback": ""},
            "missing_field",
            "Add 'color' to the fields.",
            "score 0.500 below pass threshold 0.850",
        ),
    ],
)
def test_failure_fields(fields: dict, category: str, fix: str | None, reason: str | None) -> None:
    result = evaluate_reply(json.loads(reply(**fields)), None, 0.85)
    assert result is not None and not result.passed and result.score == 0.5
    assert (result.failure_category, result.suggested_fix) == (category, fix)
    if reason is not None:
        assert result.reason == reason
    assert result.feedback == (fields.get("feedback", "Field 'color' missing"))


async def test_pass_clears_feedback_fields(registry: Path) -> None:
    judge = ScriptedJudge([reply(score=0.2, rubric_scores={k: 1.0 for k in WEIGHTS})])
    matcher = build_matcher(spec(weights=WEIGHTS), registry_root=registry, judges=judge)
    result = await matcher(context())
    assert (result.passed, result.score, result.reason) == (True, 1.0, None)
    assert (result.feedback, result.failure_category, result.suggested_fix) == ("", None, None)
    assert result.rubric_scores == {k: 1.0 for k in WEIGHTS}
    assert result.judge is judge.replies[0]


async def test_weighted_failure_through_matcher(registry: Path) -> None:
    judge = ScriptedJudge([reply()])
    matcher = build_matcher(spec(weights=WEIGHTS), registry_root=registry, judges=judge)
    result = await matcher(context())
    assert not result.passed and result.score == pytest.approx(0.83)
    assert (result.reason, result.feedback) == ("Field 'color' missing", "Field 'color' missing")
    assert result.failure_category == "missing_field"


async def test_unparseable_reply_is_an_evaluator_error(registry: Path) -> None:
    judge = ScriptedJudge([judge_reply("The output looks fine to me.")])
    result = await build_matcher(spec(), registry_root=registry, judges=judge)(context())
    assert (result.passed, result.score, result.reason) == (False, 0.0, "invalid evaluator output")
    assert result.error_kind is ErrorKind.INVALID_RESPONSE
    assert result.feedback is None


async def test_failed_evaluator_call(registry: Path) -> None:
    judge = ScriptedJudge([judge_error("ReadTimeout", ErrorKind.TIMEOUT, None)])
    result = await build_matcher(spec(), registry_root=registry, judges=judge)(context())
    assert (result.passed, result.score, result.reason) == (False, 0.0, "ReadTimeout")
    assert result.error_kind is ErrorKind.TIMEOUT


@pytest.mark.parametrize(
    "leak",
    ["{{steps}}", "{{ chain_of_thought }}", "{{intermediate}}", "generator_context", "system_prompt"],
)
def test_contaminated_prompt_is_refused(registry: Path, leak: str) -> None:
    text = (registry / SIMPLE).read_text().replace("Score the output.", f"Score it. {leak}")
    (registry / "prompts" / "leaky.prompt.md").write_text(text)
    with pytest.raises(EvalHydraError, match=r"^prompts/leaky\.prompt\.md: evaluator prompt references"):
        validate_matcher(spec("prompts/leaky.prompt.md"), "m", registry_root=registry)


def test_contamination_markers() -> None:
    assert contamination_markers("{{input}} {{output}}") == []
    assert contamination_markers("{{steps}} and generator_context") == ["{{steps}}", "generator_context"]


@pytest.mark.parametrize(
    ("prompt", "body", "message"),
    [
        (
            "p.md",
            "## User\n{{input}} {{output_format}}",
            r"^p\.md: evaluator prompt uses \{\{output_format\}\}",
        ),
        ("p.md", "---\nkey: [\n---\n## User\nx", r"^p\.md: invalid YAML front matter"),
        ("p.md", "---\nkey: 1\n## User\nx", r"^p\.md: front matter opened with '---' is never closed"),
        ("p.md", "## System\nonly system", r"^p\.md: prompt file has no '## User' section"),
        ("missing.md", None, r"^m: rubric prompt file 'missing\.md' not found"),
        ("../p.md", None, r"^m: rubric prompt path '\.\./p\.md' has an empty"),
        ("/abs/p.md", None, r"^m: rubric prompt file '/abs/p\.md' not found"),  # absolute: as written
        ("a//p.md", None, r"has an empty, '\.' or '\.\.' segment"),
    ],
)
def test_prompt_file_errors(tmp_path: Path, prompt: str, body: str | None, message: str) -> None:
    if body is not None:
        (tmp_path / prompt).write_text(body)
    with pytest.raises(EvalHydraError, match=message):
        validate_matcher(spec(prompt), "m", registry_root=tmp_path)


def test_prompt_symlink_escaping_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside.md"
    root.mkdir()
    outside.write_text("## User\n{{output}}")
    (root / "link.md").symlink_to(outside)
    with pytest.raises(EvalHydraError, match="resolves outside the registry root"):
        validate_matcher(spec("link.md"), "m", registry_root=root)
    (root / "real.md").write_text("## User\n{{output}}")
    (root / "inner.md").symlink_to(root / "real.md")
    validate_matcher(spec("inner.md"), "m", registry_root=root)


def test_parse_prompt_variants() -> None:
    plain = parse_prompt("Judge {{output}}\n", "p")
    assert (plain.system, plain.user, plain.front_matter) == (None, "Judge {{output}}", {})
    fenced = parse_prompt("## System\n```\n## User\n```\nS\n## User\nU\n", "p")
    assert (fenced.system, fenced.user) == ("```\n## User\n```\nS", "U")
    crlf = parse_prompt("---\r\na: 1\r\n---\r\n## System\r\nS\r\n## User\r\nU\r\n", "p")
    assert (crlf.system, crlf.user, crlf.front_matter) == ("S", "U", {"a": 1})


def test_render_is_single_pass() -> None:
    assert render("{{input}}|{{ output }}|{{other}}", {"input": "{{output}}", "output": "o"}) == (
        "{{output}}|o|{{other}}"
    )


async def test_non_string_input_is_json_dumped(registry: Path) -> None:
    judge = ScriptedJudge([reply()])
    matcher = build_matcher(spec(), registry_root=registry, judges=judge)
    await matcher(MatchContext(case=Case(id="c", input={"text": "é"}), output="o"))
    assert 'Input provided to the generator:\n{"text": "é"}\n' in judge.calls[0][1].user_content


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pass_threshold": 2}, r"'pass_threshold' must be a number between 0 and 1"),
        ({"weights": {"a": -1}}, r"'weights' must be a non-empty mapping"),
        ({"weights": {"a": 0.0}}, r"'weights' must have a positive sum"),
        ({"rubric": "x"}, r"key 'rubric' is not allowed for matcher kind 'rubric'"),
        ({"judge_service": None}, r"matcher kind 'rubric' needs 'judge_service'"),
    ],
)
def test_rubric_validation(registry: Path, change: dict, message: str) -> None:
    with pytest.raises(EvalHydraError, match=message):
        validate_matcher({**spec(), **change}, "m", registry_root=registry)
