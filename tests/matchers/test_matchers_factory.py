"""Load-time validation, Hydra nodes, judge discovery and the exception guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from evalhydra.config.schema import MatcherConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.values import Case, MatchResult
from evalhydra.matchers import (
    MATCHER_KINDS,
    MatchContext,
    build_matcher,
    judge_services_of,
    validate_matcher,
    with_judge_service,
)
from evalhydra.matchers.base import sync_matcher
from evalhydra.matchers.factory import guard

WHERE = "registry/evals/smoke/reply_ok.json: matcher"


def test_every_kind_is_listed() -> None:
    assert set(MATCHER_KINDS) == {
        "exact_match", "includes", "regex", "json_fields", "json_schema", "tool_call",
        "model_grade", "rubric", "all_of", "any_of", "weighted", "custom", "openai_graders",
        "tool_used", "tool_args", "tool_sequence", "step_count", "tool_call_f1", "tool_args_valid",
        "no_tool_errors", "state", "bfcl_ast", "tau2",
    }  # fmt: skip
    fields = set(MatcherConfig.__dataclass_fields__) - {"kind"}
    assert set().union(*MATCHER_KINDS.values()) == fields


def test_unknown_kind_suggests(tmp_path: Path) -> None:
    with pytest.raises(EvalHydraError) as info:
        validate_matcher({"kind": "exact"}, WHERE, registry_root=tmp_path)
    assert info.value.message == f"{WHERE}: unknown matcher kind 'exact'"
    assert info.value.hint is not None and info.value.hint.startswith("Did you mean: exact_match?")
    assert "Available: all_of, any_of, bfcl_ast, custom" in info.value.hint


def test_missing_kind(tmp_path: Path) -> None:
    with pytest.raises(EvalHydraError, match="matcher has no 'kind'"):
        validate_matcher({"case_sensitive": True}, WHERE, registry_root=tmp_path)


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"kind": "exact_match", "case_sensitiv": True}, "case_sensitiv"),
        ({"kind": "tool_call", "pattern": "x"}, "pattern"),
        ({"kind": "json_fields", "required_fields": ["a"], "strip_fence": True}, "strip_fence"),
    ],
)
def test_key_not_allowed_for_kind(tmp_path: Path, spec: dict, key: str) -> None:
    with pytest.raises(EvalHydraError, match=rf"^{WHERE}: key '{key}' is not allowed for matcher kind"):
        validate_matcher(spec, WHERE, registry_root=tmp_path)


def test_typo_gets_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(EvalHydraError) as info:
        validate_matcher({"kind": "exact_match", "case_sensitiv": True}, WHERE, registry_root=tmp_path)
    assert info.value.hint is not None and "Did you mean: case_sensitive?" in info.value.hint


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "exact_match", "case_sensitive": "yes"}, "'case_sensitive' must be true or false"),
        ({"kind": "includes", "trim_whitespace": 1}, "'trim_whitespace' must be true or false"),
        ({"kind": 3}, "unknown matcher kind 3"),
        ("exact_match", "a matcher must be a mapping"),
    ],
)
def test_type_errors(tmp_path: Path, spec: object, message: str) -> None:
    with pytest.raises(EvalHydraError, match=message):
        validate_matcher(spec, WHERE, registry_root=tmp_path)  # type: ignore[arg-type]


def test_hydra_node_none_fields_are_ignored(tmp_path: Path) -> None:
    node = OmegaConf.structured(MatcherConfig(kind="includes", case_sensitive=False))
    assert validate_matcher(node, WHERE, registry_root=tmp_path) == {
        "kind": "includes",
        "case_sensitive": False,
        "trim_whitespace": True,
    }
    dataclass_spec = MatcherConfig()  # a to_object()-ed node works too
    clean = validate_matcher(dataclass_spec, WHERE, registry_root=tmp_path)  # type: ignore[arg-type]
    assert clean["kind"] == "exact_match"


def test_hydra_node_with_parts(tmp_path: Path) -> None:
    node = OmegaConf.structured(
        MatcherConfig(kind="any_of", parts=[{"kind": "includes"}, {"kind": "regex", "pattern": "x"}])
    )
    clean = validate_matcher(node, WHERE, registry_root=tmp_path)
    assert [p["kind"] for p in clean["parts"]] == ["includes", "regex"]


def test_cleaned_spec_validates_again_unchanged(tmp_path: Path) -> None:
    spec = {"kind": "weighted", "parts": [{"kind": "includes", "weight": 2}, {"kind": "tool_call"}]}
    clean = validate_matcher(spec, WHERE, registry_root=tmp_path)
    assert validate_matcher(clean, WHERE, registry_root=tmp_path) == clean


def test_judge_services_of_is_recursive() -> None:
    spec = {
        "kind": "all_of",
        "parts": [
            {"kind": "model_grade", "judge_service": "j1", "rubric": "r"},
            {"kind": "any_of", "parts": [{"kind": "rubric", "judge_service": "j2", "prompt": "p"}]},
            {"kind": "exact_match", "judge_service": None},
        ],
    }
    assert judge_services_of(spec) == {"j1", "j2"}
    assert judge_services_of({"kind": "exact_match"}) == set()
    assert judge_services_of(OmegaConf.structured(MatcherConfig(judge_service="j"))) == {"j"}


def test_with_judge_service_overrides_judges_only() -> None:
    spec: dict[str, Any] = {
        "kind": "all_of",
        "parts": [{"kind": "model_grade", "judge_service": "j1", "rubric": "r"}, {"kind": "includes"}],
    }
    overridden = with_judge_service(spec, "other")
    assert judge_services_of(overridden) == {"other"}
    assert overridden["parts"][1] == {"kind": "includes"}
    assert spec["parts"][0]["judge_service"] == "j1"  # the input is not modified


def test_judge_matcher_without_client_is_a_programming_error(tmp_path: Path) -> None:
    spec = {"kind": "model_grade", "judge_service": "j", "rubric": "r"}
    with pytest.raises(ValueError, match="needs a JudgeClient"):
        build_matcher(spec, registry_root=tmp_path, judges=None)


async def test_guard_turns_what_a_matcher_raises_into_the_outputs_fail() -> None:
    async def explode(ctx: MatchContext) -> MatchResult:
        raise KeyError("missing")

    def explode_now(ctx: MatchContext) -> MatchResult:
        raise KeyError("missing")

    def leave(ctx: MatchContext) -> MatchResult:
        raise SystemExit(3)

    ctx = MatchContext(case=Case(id="c", input="q"), output="")
    for matcher in (explode, sync_matcher(explode_now)):  # a sync one is called without its coroutine
        result = await guard(matcher, "custom")(ctx)
        assert (result.passed, result.score) == (False, 0.0)
        assert result.reason == "the matcher raised KeyError: 'missing'"
        assert result.error_kind is None
    left = await guard(sync_matcher(leave), "custom")(ctx)
    assert left.reason == "the matcher raised SystemExit: 3" and not left.passed
