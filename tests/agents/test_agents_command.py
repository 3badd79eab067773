"""Command-service checks, argv templates, names and environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evalhydra.agents import build_argv, build_env, safe_model_name, session_name, validate_command_service
from evalhydra.config.schema import ServiceConfig
from evalhydra.core.errors import EvalHydraError


def cfg(**overrides: object) -> ServiceConfig:
    config = ServiceConfig(name="agent", kind="command")
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


def test_defaults_follow_the_seed() -> None:
    config = cfg()
    assert (config.env_prefix, config.timeout_s, config.honor_verification_marker) == ("ZRB", 300.0, True)
    validate_command_service(config, "openai:gpt-4o")


def test_zrb_template() -> None:
    argv = build_argv(cfg(cli_name="acme"), "openai:gpt-4o", "do {it}", "s-1", Path("/w"))
    assert argv == [
        "acme", "chat", "--interactive", "false", "--yolo", "true",
        "--model", "openai:gpt-4o", "--message", "do {it}", "--session", "s-1",
    ]  # fmt: skip
    assert build_argv(cfg(), "a:b", "i", "s", "/w")[0] == "zrb"


def test_claude_code_and_opencode_templates() -> None:
    assert build_argv(cfg(template="claude-code"), "sonnet", "fix it", "s", "/w") == [
        "claude", "-p", "fix it", "--output-format", "json", "--model", "sonnet",
    ]  # fmt: skip
    assert build_argv(cfg(template="opencode", cli_name="oc"), "a/b", "fix it", "s", "/w") == [
        "oc", "run", "--model", "a/b", "fix it",
    ]  # fmt: skip


def test_custom_argv_placeholders() -> None:
    config = cfg(
        argv=["{python}", "-m", "agent", "--cwd={workdir}", "{cli}", "{model}", "{session}", "{instruction}"],
        cli_name="tool",
    )
    validate_command_service(config, "anything")
    argv = build_argv(config, "m", "say {model} literally", "sess", Path("/tmp/w"))
    assert argv == [
        sys.executable,
        "-m",
        "agent",
        "--cwd=/tmp/w",
        "tool",
        "m",
        "sess",
        "say {model} literally",
    ]


@pytest.mark.parametrize("model", ["gpt-4o", ":gpt", "openai:", " : ", ""])
def test_zrb_models_must_be_provider_colon_name(model: str) -> None:
    with pytest.raises(EvalHydraError, match="provider:name|model name is empty"):
        validate_command_service(cfg(), model)


def test_other_templates_accept_any_model() -> None:
    validate_command_service(cfg(template="claude-code"), "sonnet")
    validate_command_service(cfg(template="opencode"), "anthropic/claude-sonnet")


@pytest.mark.parametrize("timeout", [0.5, 29.9])
def test_timeout_below_30_is_rejected(timeout: float) -> None:
    with pytest.raises(EvalHydraError, match=r"^service\.timeout_s must be at least 30"):
        validate_command_service(cfg(timeout_s=timeout), "a:b")
    validate_command_service(cfg(timeout_s=30), "a:b")


@pytest.mark.parametrize(
    ("overrides", "pattern"),
    [
        ({"kind": "openai"}, "need kind: command"),
        ({"template": "zrbb"}, r"(?s)Unknown service.template 'zrbb'.*Did you mean: zrb"),
        ({"template": "zrb", "argv": ["x", "{instruction}"]}, "not both"),
        ({"argv": []}, "service.argv is empty"),
        ({"argv": ["x", "{prompt}"]}, r"unknown placeholder\(s\): \{prompt\}"),
        ({"argv": ["x", "--model", "{model}"]}, "never passes the instruction"),
        ({"argv": ["{cli}", "{instruction}"]}, "service.cli_name is not set"),
        ({"env_prefix": "MY-AGENT"}, "service.env_prefix"),
    ],
)
def test_config_errors_name_the_key(overrides: dict[str, object], pattern: str) -> None:
    with pytest.raises(EvalHydraError, match=pattern):
        validate_command_service(cfg(**overrides), "a:b")


def test_safe_model_and_session_names() -> None:
    assert safe_model_name("openrouter:meta/llama-3.1 8b@q4") == "openrouter_meta_llama-3.1_8b_q4"
    assert session_name("openai:gpt-4o", "bug-fix", 3) == "openai_gpt-4o-bug-fix-trial-3"


def test_env_points_at_history_and_notes() -> None:
    env = build_env(cfg(env_prefix="ACME"), Path("/t/history"), Path("/t/notes"), base={"PATH": "/bin"})
    assert env == {"PATH": "/bin", "ACME_LLM_HISTORY_DIR": "/t/history", "ACME_LLM_JOURNAL_DIR": "/t/notes"}
