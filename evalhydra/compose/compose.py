"""Hydra composition: register the schema and the registry source, compose, type-check.

The Hydra app (:mod:`evalhydra.cli.app`) composes through ``@hydra.main``;
tests, ``rejudge`` and the Python API use :func:`compose_config`. Either way
:func:`to_config` turns the result into the typed :class:`~evalhydra.config.schema.Config`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_module
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

import evalhydra.conf as conf_pkg
from evalhydra.compose.registry_options import activate
from evalhydra.config.redact import redact_overrides
from evalhydra.config.schema import Config
from evalhydra.core.errors import EvalHydraError, did_you_mean
from hydra_plugins.evalhydra_registry import EvalHydraRegistrySource, EvalHydraSearchPath, enable

__all__ = ["compose_config", "config_dirs", "eval_choice", "eval_config_file", "keep_env_reference",
           "params_overrides", "register", "to_config"]


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose the packaged config with Hydra's compose API (tests, subcommands).

    Args:
        overrides: Hydra overrides, e.g. ``["service=mock", "trials=3"]``.
    """
    register()
    overrides = params_overrides(overrides)
    activate(overrides)
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="evalhydra.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


_PARAMS_KEY = re.compile(r"^(eval|service)\.params\.[^=]+=")


def params_overrides(overrides: Sequence[str]) -> list[str]:
    """Overrides with ``eval.params.KEY=…`` and ``service.params.KEY=…`` made ``++`` (add or
    replace), so a generation parameter can be set, and swept, whether or not the eval or
    service already sets it: ``-m eval.params.temperature=0,0.7``."""
    return [f"++{item}" if _PARAMS_KEY.match(item) else item for item in overrides]


_SWEEP_DIR = "hydra.sweep.dir="


def absolute_sweep_dir(args: Sequence[str], now: datetime | None = None) -> list[str]:
    """A multirun's arguments with ``hydra.sweep.dir`` (and a relative ``registry=`` or
    ``store.path=``) made absolute, from this directory.

    A launcher whose jobs run elsewhere (a Ray cluster started in another directory) would
    otherwise put every job's folder, and its store, under its own working directory. The
    default sweep folder, ``outputs/multirun/<date>/<time>``, is filled in here, at the
    driver's time.
    """
    if not any(a in ("-m", "--multirun") for a in args):
        return list(args)
    out = [a for a in args if not a.startswith(_SWEEP_DIR)]
    given = [a[len(_SWEEP_DIR):].strip("'\"") for a in args if a.startswith(_SWEEP_DIR)]
    stamp = (now or datetime.now()).strftime("%Y-%m-%d/%H-%M-%S")
    folder = given[-1] if given else f"outputs/multirun/{stamp}"
    if "${" in folder:  # an interpolation: Hydra resolves it where it can
        return list(args)
    return [*_absolute_paths(out), f"{_SWEEP_DIR}'{Path(folder).expanduser().resolve()}'"]


#: Overrides naming a path that a job running in another directory must still find.
_PATH_KEYS = ("registry", "store.path")


def _absolute_paths(args: list[str]) -> list[str]:
    """``registry=reg`` and ``store.path=x.db`` given relative, made absolute from here (a
    registry name that is no folder here, such as the packaged one, is left alone)."""
    out = []
    for arg in args:
        key, sep, value = arg.partition("=")
        plain = value.strip("'\"")
        if sep and key.lstrip("+~") in _PATH_KEYS and plain and "${" not in plain and "," not in plain \
                and not Path(plain).is_absolute() and (key != "registry" or Path(plain).is_dir()):
            arg = f"{key}='{Path(plain).expanduser().resolve()}'"
        out.append(arg)
    return out


def to_config(cfg: DictConfig) -> Config:
    """Turn a composed config into the typed :class:`Config` (fails on ``???``)."""
    _reject_unknown_keys(cfg, "")
    try:
        obj = OmegaConf.to_object(cfg)
    except MissingMandatoryValue as exc:
        raise EvalHydraError(f"Missing value for '{exc.full_key}'.", "Set it on the command line.") from None
    except (OmegaConfBaseException, TypeError) as exc:
        raise EvalHydraError(f"Invalid configuration: {exc}".split("\n")[0]) from None
    assert isinstance(obj, Config)
    return obj


def _reject_unknown_keys(node: Any, path: str) -> None:
    """Fail on keys a ``+key=`` override added outside the schema (Hydra lets them through)."""
    if not isinstance(node, DictConfig):
        return
    schema = OmegaConf.get_type(node)
    if dataclasses.is_dataclass(schema):
        allowed = {f.name for f in dataclasses.fields(schema)}
        for key in map(str, node):
            if key not in allowed:
                name = f"{path}{key}"
                raise EvalHydraError(f"Unknown config key '{name}'.", did_you_mean(str(key), allowed))
    for key in map(str, node):
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_none() and not child._is_missing():
            _reject_unknown_keys(child, f"{path}{key}.")


def register() -> None:
    """Register the schema and the registry config source with Hydra (idempotent).

    The config source is registered explicitly because Hydra's plugin scan
    cannot see namespace packages of editable installs.
    """
    ConfigStore.instance().store(name="evalhydra_schema", node=Config)
    Plugins.instance().register(EvalHydraRegistrySource)
    Plugins.instance().register(EvalHydraSearchPath)
    enable()
    if not OmegaConf.has_resolver("env"):
        OmegaConf.register_new_resolver("env", keep_env_reference)
    if not OmegaConf.has_resolver("evalhydra_redacted"):
        OmegaConf.register_new_resolver("evalhydra_redacted", redacted_dirname)
    if not OmegaConf.has_resolver("evalhydra_job_hash"):
        OmegaConf.register_new_resolver("evalhydra_job_hash", job_hash)
    if not OmegaConf.has_resolver("evalhydra_process"):
        OmegaConf.register_new_resolver("evalhydra_process", process_tag, use_cache=True)


def process_tag() -> str:
    """``p<pid>``: a run folder's suffix that no other process running at the same moment on this
    host shares (two runs started in one second get a folder each), the same every time one run
    resolves it (the resolver's value is cached)."""
    return f"p{os.getpid()}"


def redacted_dirname(override_dirname: str) -> str:
    """A sweep job's folder name without secrets: ``${evalhydra_redacted:${hydra.job.override_dirname}}``
    gives ``+service.headers.X-Token=redacted,trials=3`` for a literal token override."""
    if not override_dirname:
        return ""
    return ",".join(redact_overrides(override_dirname.split(","))).replace("=<redacted>", "=redacted")


def job_hash(override_dirname: str) -> str:
    """A sweep job's folder suffix: 8 hex digits of its overrides (secrets redacted first), so a
    folder name never holds a URL, a path or a secret, and stays short:
    ``${hydra.job.num}-${evalhydra_job_hash:${hydra.job.override_dirname}}`` gives ``3-1f0c9a2e``.
    The job's overrides are in its ``.hydra/overrides.yaml`` and its ``runs`` row."""
    return hashlib.sha256(redacted_dirname(override_dirname).encode()).hexdigest()[:8]


def keep_env_reference(name: str) -> str:
    """Resolve ``${env:NAME}`` to itself, so secrets are never resolved into a config.

    Header values such as ``Bearer ${env:TOKEN}`` stay literal in the composed
    config, Hydra's saved ``config.yaml`` and the store; only the HTTP client
    substitutes the variable, at request time.
    """
    return "${env:" + name + "}"


def config_dirs() -> list[Path]:
    """Every directory configs are read from: the packaged ``conf/``, then each
    ``--config-dir`` (or other file source) of the running Hydra app."""
    dirs = [Path(d) for d in conf_pkg.__path__]
    if HydraConfig.initialized():
        for source in HydraConfig.get().runtime.config_sources:
            if source.schema == "file" and Path(source.path) not in dirs:
                dirs.append(Path(source.path))
    return dirs


def eval_choice(overrides: Sequence[str] = ()) -> str | None:
    """The ``eval=`` option this config was composed with: Hydra's record of the choice in a
    running app, else the last ``eval=`` override (the compose API keeps no record)."""
    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("eval")
        return str(choice) if choice else None
    chosen = [item.partition("=")[2] for item in overrides if item.partition("=")[0].lstrip("+~") == "eval"]
    return chosen[-1].strip("'\"") if chosen else None


def eval_config_file(choice: str | None) -> Path | None:
    """The ``eval/<choice>.yaml`` a config directory holds for an eval option (the
    ``--config-dir`` ones first), or None for a registry eval."""
    if not choice:
        return None
    for directory in reversed(config_dirs()):
        path = Path(directory, "eval", f"{choice}.yaml")
        if path.is_file():
            return path.resolve()
    return None
