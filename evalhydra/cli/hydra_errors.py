"""Hydra's and OmegaConf's errors as one ``error:`` line with the fix (exit code 2).

Hydra prints composition errors over many lines (the config search path, a
``HYDRA_FULL_ERROR`` hint) and exits 1, the code of a failed gate. The app
lets Hydra raise instead, and :func:`explain` turns each error a user can
fix into an :class:`~evalhydra.errors.EvalHydraError` naming the key or the
option, what is wrong, and the closest valid names.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from hydra.errors import (
    ConfigCompositionException,
    HydraException,
    MissingConfigException,
    OverrideParseException,
    SearchPathException,
)
from omegaconf.errors import OmegaConfBaseException

import evalhydra.config.schema as schema_module
from evalhydra.cli.commands import SUBCOMMANDS
from evalhydra.config.schema import Config
from evalhydra.errors import EvalHydraError, did_you_mean

__all__ = ["explain", "schema_keys"]

_COULD_NOT_OVERRIDE = re.compile(r"Could not override '([^']+)'")
_MERGING = re.compile(r"Error merging override (.+)")


def explain(exc: BaseException) -> EvalHydraError | None:
    """The user-facing error for a Hydra or OmegaConf exception, or None for anything else."""
    if isinstance(exc, EvalHydraError):
        return exc
    if isinstance(exc, MissingConfigException):
        return _missing_option(exc)
    if isinstance(exc, OverrideParseException):
        return _unparsable(exc)
    if isinstance(exc, ConfigCompositionException):
        return _composition(exc)
    if isinstance(exc, SearchPathException):
        return EvalHydraError(_first_line(exc), "Check the --config-dir (or -cd) path.")
    if isinstance(exc, HydraException | OmegaConfBaseException):
        return EvalHydraError(_first_line(exc))
    return None


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
    if group and exc.options is not None:
        return EvalHydraError(f"{group}={name}: there is no {group} named '{name}'.",
                              did_you_mean(name, exc.options))
    return EvalHydraError(_first_line(exc), "Check the config name and --config-dir.")


def _unparsable(exc: OverrideParseException) -> EvalHydraError:
    word = str(exc.override or "")
    if word and "=" not in word and not word.startswith("-"):
        hint = did_you_mean(word, SUBCOMMANDS).replace("Available:", "Subcommands:")
        return EvalHydraError(f"'{word}' is neither a subcommand nor an override (key=value).",
                              hint + "\nSee evalhydra --help.")
    lines = [line for line in str(exc.message).splitlines() if line.strip() and "hydra.cc" not in line]
    detail = lines[-1].strip() if lines else "not key=value"
    return EvalHydraError(f"cannot parse override '{word}': {detail}",
                          "Overrides are key=value; quote values with spaces or special characters.")


def _composition(exc: ConfigCompositionException) -> EvalHydraError:
    text = str(exc)
    unknown = _COULD_NOT_OVERRIDE.search(text)
    if unknown:
        key = unknown.group(1)
        hint = did_you_mean(key.rsplit(".", 1)[-1], schema_keys(key))
        return EvalHydraError(f"{key}: no such config key.", hint)
    merging = _MERGING.search(text)
    if merging and isinstance(exc.__cause__, OmegaConfBaseException):
        return EvalHydraError(f"{merging.group(1)}: {_first_line(exc.__cause__)}")
    return EvalHydraError(_first_line(exc))


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
