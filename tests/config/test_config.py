"""Composition, validation and the frozen plan."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import evalhydra.conf
import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import DictConfig

from evalhydra.core.errors import EvalHydraError
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import cell_key
from tests.conftest import ZIG_FIXTURE

Compose = Callable[..., DictConfig]
CONF = Path(next(iter(evalhydra.conf.__path__)))


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONF / "service").glob("*.yaml")))
def test_every_service_yaml_builds_a_plan(compose: Compose, name: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    is_agent = "kind: command" in (CONF / "service" / f"{name}.yaml").read_text()
    for cli in ("zrb", "claude", "opencode"):  # stand-ins: the real agent CLIs are not installed here
        (tmp_path / cli).write_text("#!/bin/sh\n")
        (tmp_path / cli).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    plan = build_plan(compose(f"service={name}", *(["eval=agent_cases"] if is_agent else [])))
    assert plan.service.name == name
    assert plan.evals[0].id == ("agent_cases" if is_agent else "smoke.reply_ok")


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONF / "matcher").glob("*.yaml")))
def test_every_matcher_yaml_validates(compose: Compose, name: str) -> None:
    plan = build_plan(compose(f"matcher={name}"))
    assert plan.evals[0].matcher["kind"] == name


def test_registry_options_are_config_options(compose: Compose) -> None:
    plan = build_plan(compose("eval=multimodal"))
    assert [e.id for e in plan.evals] == ["multimodal.image_object", "multimodal.release_notes"]
    plan = build_plan(compose("eval=smoke.reply_ok", "eval.matcher.case_sensitive=false"))
    assert plan.evals[0].matcher["case_sensitive"] is False
    plan = build_plan(compose("service=local", "eval=tools"))
    assert plan.service.base_url == "http://127.0.0.1:9000/v1"
    (search,) = [e for e in plan.evals if e.id == "tools.search_web"]
    assert search.tools[0].parameters["required"] == ["query"]


def test_matcher_group_overrides_every_eval(compose: Compose) -> None:
    plan = build_plan(compose("eval=multimodal", "matcher=exact_match"))
    assert {e.matcher["kind"] for e in plan.evals} == {"exact_match"}


def test_unknown_service_lists_options(compose: Compose) -> None:
    with pytest.raises(MissingConfigException, match=r"(?s)Could not find 'service/mok'.*mock_slow"):
        compose("service=mok")


def test_wrong_type_and_unknown_key_fail_before_any_call(compose: Compose) -> None:
    with pytest.raises(ConfigCompositionException, match="trials=abc"):
        compose("trials=abc")
    with pytest.raises(ConfigCompositionException, match="service.foo"):
        compose("service.foo=1")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("service.timeout_ms=0", r"service.timeout_ms=0: must be >= 1"),
    ("service.rate_limit.rpm=0", r"service.rate_limit.rpm=0: must be >= 1"),
    ("service.pricing.output_per_mtok=-1", r"service.pricing.output_per_mtok=-1.0: must be >= 0"),
    ("service.max_concurrency=5000", r"service.max_concurrency=5000: must be in 1\.\.4096"),
    ("service.mock.fail_rate=2", r"service.mock: .*fail_rate"),
        ("service.retry.max_attempts=11", r"service.retry.max_attempts=11: must be an integer in 1\.\.10"),
        ("run.concurrency=0", r"run.concurrency=0: must be at least 1"),
        ("trials=10001", r"trials=10001: must be in 1\.\.10000"),
        ("judge_service=nope", r"(?s)Judge service 'nope' not found.*Available:"),
        ("eval.matcher.kind=exact_mach", r"(?s)exact_mach.*Did you mean"),
    ],
)
def test_values_validated_with_the_key_named(compose: Compose, override: str, message: str) -> None:
    extra = ["eval=quality"] if override.startswith("judge_service") else []
    with pytest.raises(EvalHydraError, match=message):
        build_plan(compose(*extra, override))


def test_allowlist_excludes_service(compose: Compose) -> None:
    with pytest.raises(EvalHydraError, match="No eval runs matched"):
        build_plan(compose(f"registry={ZIG_FIXTURE}", "eval=smoke"))
    plan = build_plan(compose(f"registry={ZIG_FIXTURE}", "service=local-product", "eval=smoke"))
    assert plan.evals[0].id == "smoke.reply_ok"


def test_plan_is_frozen_and_secret_free(compose: Compose, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN", "sk-secret-value")
    plan = build_plan(compose("+service.headers.X-Api-Key=Bearer ${env:TOKEN}"))
    with pytest.raises(AttributeError):
        plan.model = "x"  # type: ignore[misc]
    assert plan.service.headers["X-Api-Key"] == "Bearer ${env:TOKEN}"
    assert "sk-secret-value" not in repr(plan.config)
    assert plan.config["service"]["headers"]["X-Api-Key"] == "Bearer ${env:TOKEN}"  # a reference, no secret
    literal = build_plan(compose("+service.headers.X-Api-Key=sk-literal-value"))
    assert literal.config["service"]["headers"]["X-Api-Key"] == "<redacted>"


def test_cell_key_tracks_result_relevant_config(compose: Compose) -> None:
    base = build_plan(compose())
    keys = {cell_key(base.evals[0], "c", "h", "mock", "m", 1, "s")}
    for override in ("eval.matcher.case_sensitive=false", "eval.matcher.trim_whitespace=false"):
        plan = build_plan(compose(override))
        keys.add(cell_key(plan.evals[0], "c", "h", "mock", "m", 1, "s"))
    same = build_plan(compose("service.timeout_ms=5", "run.concurrency=3"))
    assert cell_key(same.evals[0], "c", "h", "mock", "m", 1, "s") in keys
    assert len(keys) == 3


def test_a_missing_agent_cli_fails_before_any_trial(compose: Compose, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EvalHydraError, match="the agent CLI 'zrb' is not installed or not on PATH"):
        build_plan(compose("service=zrb", "eval=agent_cases"))


def test_a_multirun_sweep_dir_is_made_absolute_at_the_drivers_time(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime

    from evalhydra.compose.compose import absolute_sweep_dir

    monkeypatch.chdir(tmp_path)
    now = datetime(2026, 12, 3, 10, 42, 5)
    assert absolute_sweep_dir(["eval=smoke"]) == ["eval=smoke"]  # a single run keeps Hydra's default
    assert absolute_sweep_dir(["-m", "trials=1,2"], now)[-1] == (
        f"hydra.sweep.dir='{tmp_path}/outputs/multirun/2026-12-03/10-42-05'")
    given = absolute_sweep_dir(["-m", "hydra.sweep.dir=sweep"], now)
    assert given == ["-m", f"hydra.sweep.dir='{tmp_path}/sweep'"]


def test_every_service_setting_is_placed_in_or_out_of_a_cells_identity() -> None:
    """A new ServiceConfig field must be placed: hashed into the cell key, or said not to matter."""
    from dataclasses import fields

    from evalhydra.config.schema import ReasoningConfig, ServiceConfig
    from evalhydra.plan.cells import (
        NAMED_BY_THE_SERVICE,
        NOT_RESULT_FIELDS,
        RESULT_FIELDS_HASHED,
        RESULT_FIELDS_IN_KEY,
        service_result_hash,
    )

    placed = [RESULT_FIELDS_HASHED, RESULT_FIELDS_IN_KEY, NAMED_BY_THE_SERVICE, NOT_RESULT_FIELDS]
    assert sum(len(group) for group in placed) == len(set().union(*placed))  # each field in one group
    assert {f.name for f in fields(ServiceConfig)} == set().union(*placed)
    base = ServiceConfig(name="s", base_url="http://h/v1", kind="openai")
    changes = {"system_prompt": "Be terse.", "params": {"temperature": 0.7}, "provider": "azure",
               "kind": "command", "template": "zrb", "argv": ["x"], "base_url": "http://other/v1",
               "honor_verification_marker": False, "env_prefix": "OTHER", "stream": True, "api": "responses",
               "revision": "2026-12-07"}
    for name, value in changes.items():
        changed = ServiceConfig(name="s", base_url="http://h/v1", kind="openai")
        setattr(changed, name, value)
        assert service_result_hash(changed) != service_result_hash(base), name
    replied = ServiceConfig(name="s", base_url="http://h/v1", kind="openai")
    replied.mock.fixed_reply = "OK"
    assert service_result_hash(replied) != service_result_hash(base)
    thinking_mock = ServiceConfig(name="s", base_url="http://h/v1", kind="openai")
    thinking_mock.mock.reasoning = "inline"
    assert service_result_hash(thinking_mock) != service_result_hash(base)
    for reasoning in ({"parse": False}, {"tags": ["<reason>", "</reason>"]}):
        thinking = ServiceConfig(name="s", base_url="http://h/v1", kind="openai")
        thinking.reasoning = ReasoningConfig(**reasoning)  # type: ignore[arg-type]
        assert service_result_hash(thinking) != service_result_hash(base), reasoning
    assert {*changes, "mock", "reasoning"} == set(RESULT_FIELDS_HASHED)
