"""How an agent CLI is invoked: argv templates, config checks, names, environment.

Built-in templates (``service.template``; the default is ``zrb``):

* ``zrb``: ``<cli> chat --interactive false --yolo true --model M --message I --session S``
  (``cli`` defaults to ``zrb``; models must be ``provider:name``).
* ``claude-code``: ``<cli> -p I --output-format json --model M`` (``cli``
  defaults to ``claude``); tokens come from the JSON ``usage`` block.
* ``opencode``: ``<cli> run --model M I`` (``cli`` defaults to ``opencode``);
  tokens come from a ``Tokens: 1,234 input, 567 output, 89 cache read`` line.

A custom ``service.argv`` list replaces the template. Its items may contain
the placeholders ``{cli}`` (``service.cli_name``), ``{model}``,
``{instruction}``, ``{session}``, ``{workdir}`` (the trial's cwd) and
``{python}`` (the running interpreter, so ``[{python}, -m, pkg]`` works in
any virtualenv). Values are substituted as whole strings, never re-parsed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from evalhydra.agents.models import DEFAULT_CLI, MIN_TIMEOUT_S
from evalhydra.config.schema import ServiceConfig
from evalhydra.core.errors import EvalHydraError, did_you_mean

__all__ = [
    "check_executable",
    "DEFAULT_CLI",
    "MIN_TIMEOUT_S",
    "PLACEHOLDERS",
    "TEMPLATES",
    "build_argv",
    "build_env",
    "cli_version",
    "safe_model_name",
    "session_name",
    "template_name",
    "validate_command_service",
    "version_argv",
]

TEMPLATES: dict[str, tuple[str, ...]] = {
    "zrb": (
        "{cli}", "chat", "--interactive", "false", "--yolo", "true",
        "--model", "{model}", "--message", "{instruction}", "--session", "{session}",
    ),
    "claude-code": ("{cli}", "-p", "{instruction}", "--output-format", "json", "--model", "{model}"),
    "opencode": ("{cli}", "run", "--model", "{model}", "{instruction}"),
}  # fmt: skip
PLACEHOLDERS = frozenset({"cli", "model", "instruction", "session", "workdir", "python"})

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_ENV_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def safe_model_name(model: str) -> str:
    """Replace every character outside ``[A-Za-z0-9_.-]`` with ``_`` (``a:b/c`` → ``a_b_c``)."""
    return _UNSAFE.sub("_", model)


def session_name(model: str, case: str, trial_index: int) -> str:
    """Return the session name ``{safe_model}-{case}-trial-{N}``."""
    return f"{safe_model_name(model)}-{case}-trial-{trial_index}"


def template_name(cfg: ServiceConfig) -> str | None:
    """Return the built-in template in use, or None when ``service.argv`` is set."""
    if cfg.argv:
        return None
    return cfg.template or "zrb"


def validate_command_service(cfg: ServiceConfig, model: str) -> None:
    """Check a ``kind: command`` service and a model before any trial runs.

    Raises:
        EvalHydraError: Naming the offending ``service.*`` key and the fix.
    """
    if cfg.kind != "command":
        raise EvalHydraError(f"Service {cfg.name!r} has kind {cfg.kind!r}; agent evals need kind: command")
    if cfg.timeout_s < MIN_TIMEOUT_S:
        raise EvalHydraError(
            f"service.timeout_s must be at least {MIN_TIMEOUT_S:g} seconds (got {cfg.timeout_s:g})",
            "Agent trials take a while; set e.g. service.timeout_s=300",
        )
    if not _ENV_PREFIX.match(cfg.env_prefix or ""):
        raise EvalHydraError(
            f"service.env_prefix must be a valid environment variable prefix (got {cfg.env_prefix!r})",
            "Use letters, digits and underscores, e.g. service.env_prefix=ZRB",
        )
    _check_invocation(cfg)
    _check_model(template_name(cfg), model)


def check_executable(cfg: ServiceConfig, model: str) -> None:
    """The agent CLI must exist before any trial runs (else every trial would be an ERROR).

    Raises:
        EvalHydraError: Naming the missing program and the setting that points at it.
    """
    program = build_argv(cfg, model, "", "", ".")[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        found = os.access(program, os.X_OK) and Path(program).is_file()
    else:
        found = shutil.which(program) is not None
    if not found:
        raise EvalHydraError(
            f"service '{cfg.name}': the agent CLI '{program}' is not installed or not on PATH.",
            "Install it, or point service.cli_name (or service.argv) at the executable.",
        )


def _check_invocation(cfg: ServiceConfig) -> None:
    if cfg.argv and cfg.template:
        raise EvalHydraError(
            "Set service.template or service.argv, not both",
            f"service.template={cfg.template!r} would be ignored; remove one of them",
        )
    if cfg.argv is not None:
        _check_argv(cfg)
    elif (cfg.template or "zrb") not in TEMPLATES:
        raise EvalHydraError(
            f"Unknown service.template {cfg.template!r}",
            did_you_mean(str(cfg.template), TEMPLATES) + "\nOr give a custom service.argv list.",
        )


def _check_argv(cfg: ServiceConfig) -> None:
    argv = [str(item) for item in cfg.argv or []]
    if not argv:
        raise EvalHydraError("service.argv is empty", "Give the command, e.g. [mycli, run, '{instruction}']")
    used = {name for item in argv for name in _PLACEHOLDER.findall(item)}
    unknown = sorted(used - PLACEHOLDERS)
    if unknown:
        raise EvalHydraError(
            f"service.argv uses unknown placeholder(s): {', '.join('{' + u + '}' for u in unknown)}",
            f"Available: {', '.join('{' + p + '}' for p in sorted(PLACEHOLDERS))}",
        )
    if "instruction" not in used:
        raise EvalHydraError(
            "service.argv never passes the instruction",
            "Add '{instruction}' where the CLI expects the prompt",
        )
    if "cli" in used and not cfg.cli_name:
        raise EvalHydraError("service.argv uses {cli} but service.cli_name is not set")


def _check_model(template: str | None, model: str) -> None:
    if not model or not model.strip():
        raise EvalHydraError("service.model: the model name is empty.",
                             "Set service.model=provider:name (or service.default_model), "
                             "e.g. openai:gpt-4o.")
    if template != "zrb":
        return
    provider, sep, name = model.partition(":")
    if not (sep and provider.strip() and name.strip()):
        raise EvalHydraError(
            f"Model {model!r} must be in 'provider:name' format (e.g. 'openai:gpt-4o') for the zrb template",
            "Set service.model=provider:name",
        )


def build_argv(
    cfg: ServiceConfig, model: str, instruction: str, session: str, workdir: Path | str
) -> list[str]:
    """Return the command line for one trial (call :func:`validate_command_service` first).

    Args:
        cfg: The command service.
        model: The model name, passed through unchanged.
        instruction: The case's instruction, verbatim.
        session: The session name (see :func:`session_name`).
        workdir: The trial's working directory.

    Returns:
        argv with every placeholder replaced.
    """
    template = template_name(cfg)
    items = [str(item) for item in cfg.argv or []] if template is None else list(TEMPLATES[template])
    default_cli = DEFAULT_CLI.get(template or "", "")
    values = {
        "cli": cfg.cli_name or default_cli,
        "model": model,
        "instruction": instruction,
        "session": session,
        "workdir": str(workdir),
        "python": sys.executable,
    }
    return [_substitute(item, values) for item in items]


def _substitute(item: str, values: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), item)


def build_env(
    cfg: ServiceConfig,
    history_dir: Path,
    notes_dir: Path,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Return the trial's environment: ``base`` (default ``os.environ``) plus the two dirs.

    ``<PREFIX>_LLM_HISTORY_DIR`` points at ``history_dir`` and
    ``<PREFIX>_LLM_JOURNAL_DIR`` at ``notes_dir`` (PREFIX is ``service.env_prefix``).
    """
    env = dict(os.environ if base is None else base)
    env[f"{cfg.env_prefix}_LLM_HISTORY_DIR"] = str(history_dir)
    env[f"{cfg.env_prefix}_LLM_JOURNAL_DIR"] = str(notes_dir)
    return env


def version_argv(cfg: ServiceConfig) -> list[str]:
    """The command that prints the agent CLI's version: its program (``python -m pkg``
    too) and ``--version``."""
    argv = build_argv(cfg, "", "", "", ".")
    program = argv[:3] if argv[1:2] == ["-m"] else argv[:1]
    return [*program, "--version"]


def cli_version(cfg: ServiceConfig) -> str:
    """What ``<cli> --version`` prints (stdout, else stderr), or "" when it cannot run, as zrb does."""
    try:
        done = subprocess.run(version_argv(cfg), capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() or done.stderr.strip()
