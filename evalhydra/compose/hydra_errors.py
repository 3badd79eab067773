"""Hydra's and OmegaConf's errors as one ``error:`` line with the fix (exit code 2).

Hydra prints composition errors over many lines (the config search path, a
``HYDRA_FULL_ERROR`` hint) and exits 1, the code of a failed gate. The app
lets Hydra raise instead, and :func:`explain` turns each error a user can
fix into an :class:`~evalhydra.core.errors.EvalHydraError` naming the key or the
option, what is wrong, and the closest valid names.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from hydra.errors import (
    ConfigCompositionException,
    HydraException,
    MissingConfigException,
    OverrideParseException,
    SearchPathException,
)
from omegaconf import DictConfig
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

import evalhydra.config.schema as schema_module
from evalhydra.compose.compose import compose_config
from evalhydra.compose.registry_options import active_root
from evalhydra.config.schema import Config
from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.registry.definitions import is_registry, load_registry

__all__ = ["LAUNCHER_EXTRAS", "compose_explained", "explain", "schema_keys"]

#: Each Hydra launcher evalhydra documents, and the extra that installs it.
LAUNCHER_EXTRAS = {"joblib": "joblib", "ray": "ray", "ray_aws": "ray", "submitit_slurm": "slurm",
                   "submitit_local": "slurm"}
_COULD_NOT_OVERRIDE = re.compile(r"Could not override '([^']+)'")
_MERGING = re.compile(r"Error merging override (.+)")
_IN_CONFIG = re.compile(r"In '([^']+)'")
#: What a value of an OmegaConf type looks like, for "could not be converted to <type>".
_TYPE_EXAMPLES = {"Integer": "an integer (e.g. 3)", "Float": "a number (e.g. 0.5)",
                  "Boolean": "true or false", "String": "a string"}


def explain(exc: BaseException, subcommands: Sequence[str] = ()) -> EvalHydraError | None:
    """The user-facing error for a Hydra or OmegaConf exception, or None for anything else.

    Args:
        exc: What composing or running raised.
        subcommands: The command line's subcommands, suggested for a bare word that is
            no override.
    """
    if isinstance(exc, EvalHydraError):
        return exc
    if isinstance(exc, MissingConfigException):
        return _missing_option(exc)
    if isinstance(exc, OverrideParseException):
        return _unparsable(exc, subcommands)
    if isinstance(exc, ConfigCompositionException):
        return _composition(exc)
    if isinstance(exc, SearchPathException):
        return EvalHydraError(_first_line(exc), "Check the --config-dir (or -cd) path.")
    if isinstance(exc, yaml.YAMLError):
        return _yaml(exc)
    if isinstance(exc, HydraException | OmegaConfBaseException):
        return EvalHydraError(_first_line(exc), _value_hint(exc))
    return None


def compose_explained(overrides: Sequence[str]) -> DictConfig:
    """The config ``overrides`` compose, with Hydra's and OmegaConf's errors raised as
    :func:`explain` words them (anything else as it came).

    Raises:
        EvalHydraError: A user-fixable problem in the overrides or the config files.
    """
    try:
        return compose_config(overrides)
    except Exception as exc:  # Hydra and OmegaConf raise many kinds; explain() knows them
        error = explain(exc)
        if error is None:
            raise
        raise error from None


def _yaml(exc: yaml.YAMLError) -> EvalHydraError:
    """A config file that is not YAML: its path and line (PyYAML's marks are 0-based)."""
    # the context mark is where an unclosed bracket or quote opened, the problem mark where parsing stopped
    mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
    where = f"{mark.name}:{mark.line + 1}" if mark is not None else "a config file"
    problem = " ".join(str(part) for part in (getattr(exc, "context", None), getattr(exc, "problem", None))
                       if part)
    return EvalHydraError(f"{where}: invalid YAML: {problem or type(exc).__name__}.",
                          "Fix the YAML at that line: an unclosed bracket or quote, or a misplaced indent?")


def _value_hint(exc: BaseException) -> str | None:
    """The fix for a value OmegaConf could not convert (it names the type it wanted)."""
    match = re.search(r"could not be converted to (\w+)", str(exc))
    if not match:
        return None
    wanted = _TYPE_EXAMPLES.get(match.group(1), f"a value of type {match.group(1)}")
    key = getattr(exc, "full_key", None)
    return f"Give {key} {wanted}." if key else f"Give {wanted}."


def schema_keys(dotted: str) -> list[str]:
    """The keys the schema allows beside the last part of ``dotted`` (``run.x`` → RunConfig's fields)."""
    node: Any = Config
    for part in dotted.split(".")[:-1]:
        fields = {f.name: f for f in dataclasses.fields(node)} if dataclasses.is_dataclass(node) else {}
        if part not in fields:
            return []
        node = _dataclass_of(fields[part].type)
    return [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []


def _dataclass_of(annotation: Any) -> Any:
    """The dataclass named by a field annotation such as ``"RunConfig"`` or ``"MatcherConfig | None"``."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    name = text.split("|")[0].strip()
    return getattr(schema_module, name, None)


def _missing_option(exc: MissingConfigException) -> EvalHydraError:
    missing = exc.missing_cfg_file or ""
    group, _, name = missing.rpartition("/")
    if group == "eval":
        broken = load_registry(active_root()).broken_for(name)
        if broken is not None:  # the file is there but does not load: say why
            return broken
    if group == "hydra/launcher" and name in LAUNCHER_EXTRAS and name not in (exc.options or ()):
        return EvalHydraError(f"hydra/launcher={name}: the launcher is not installed.",
                              f"pip install 'evalhydra[{LAUNCHER_EXTRAS[name]}]'")
    if group and exc.options is not None:
        return EvalHydraError(f"{group}={name}: there is no {group} named '{name}'.",
                              _evals_here_hint(group) + did_you_mean(name, exc.options))
    return EvalHydraError(_first_line(exc), "Check the config name and --config-dir.")


def _evals_here_hint(group: str) -> str:
    """``found evals/ here: add registry=.`` when this folder is a registry that is not the active one."""
    here = Path.cwd()
    if group in ("eval", "service") and is_registry(here) and active_root() != here.resolve():
        return "found evals/ here: add registry=.\n"
    return ""


def _unparsable(exc: OverrideParseException, subcommands: Sequence[str]) -> EvalHydraError:
    word = str(exc.override or "")
    if word and "=" not in word and not word.startswith("-"):
        hint = did_you_mean(word, subcommands).replace("Available:", "Subcommands:")
        return EvalHydraError(f"'{word}' is neither a subcommand nor an override (key=value).",
                              hint + "\nSee evalhydra --help.")
    lines = [line for line in str(exc.message).splitlines() if line.strip() and "hydra.cc" not in line]
    detail = lines[-1].strip() if lines else "not key=value"
    return EvalHydraError(f"cannot parse override '{word}': {detail}",
                          "Overrides are key=value; quote values with spaces or special characters.")


_SWEEP_WITHOUT_M = re.compile(r"(?:Ambiguous value for argument|Sweep parameters) '([^']+)'")


def _composition(exc: ConfigCompositionException) -> EvalHydraError:
    text = str(exc)
    sweep = _SWEEP_WITHOUT_M.search(text)
    if sweep:
        return EvalHydraError(f"{sweep.group(1)}: comma-separated values sweep: add -m.",
                              f"evalhydra -m {sweep.group(1)} runs one job per value; quote it "
                              f"('{sweep.group(1)}') to pass the text itself, or write a list as key=[a,b].")
    unknown = _COULD_NOT_OVERRIDE.search(text)
    if unknown:
        key = unknown.group(1)
        hint = did_you_mean(key.rsplit(".", 1)[-1], schema_keys(key))
        return EvalHydraError(f"{key}: no such config key.", hint)
    merging = _MERGING.search(text)
    cause = exc.__cause__ or exc.__context__  # Hydra re-raises file errors without ``from``
    if isinstance(cause, EvalHydraError):  # a registry file, read while Hydra composed
        return cause
    if merging and isinstance(cause, OmegaConfBaseException):
        return EvalHydraError(f"{merging.group(1)}: {_first_line(cause)}", _value_hint(cause))
    in_config = _IN_CONFIG.match(text)
    if in_config and isinstance(cause, ConfigKeyError | ValidationError):
        return _in_config_file(f"{in_config.group(1)}.yaml", cause)
    return EvalHydraError(_first_line(exc), "Check the overrides and the config files they name.")


def _in_config_file(name: str, cause: OmegaConfBaseException) -> EvalHydraError:
    """A key or value in a config file (``service/mine.yaml`` under a config dir) the schema refuses."""
    key = str(getattr(cause, "full_key", "") or "")
    if isinstance(cause, ConfigKeyError):
        bad = key or _first_line(cause)
        return EvalHydraError(f"{name}: {bad}: no such config key.",
                              did_you_mean(bad.rsplit(".", 1)[-1], schema_keys(bad)))
    return EvalHydraError(f"{name}: {key}: {_first_line(cause)}",
                          _value_hint(cause) or "Check the value's type in the schema.")


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
