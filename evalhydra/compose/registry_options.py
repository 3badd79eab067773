"""Expose a registry's services and evals as Hydra config-group options.

The search path holds ``evalhydra-registry://<registry path>`` (added by the plugin in
``hydra_plugins/evalhydra_registry``; launchers carry it to their workers).
That source answers for ``service/<name>`` (every entry of ``services.json``),
``eval/<group>`` (every eval of a group) and ``eval/<id>`` (one eval), so they
are selected, overridden, swept and listed ("Available options") exactly like
the YAML files in ``conf/``.

Which registry is active is decided before Hydra starts: :func:`activate`
reads the ``registry=`` override (``evalhydra.__main__`` and
:func:`evalhydra.compose.compose.compose_config` call it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.registry.definitions import Registry, load_registry, resolve_registry_root

__all__ = ["activate", "active_root", "eval_option", "literal", "registry_options", "service_option"]

_ACTIVE: dict[str, Path] = {}
ENV_VAR = "EVALHYDRA_REGISTRY"


def activate(overrides: list[str]) -> Path:
    """Choose the active registry from ``registry=`` overrides (last one wins).

    Falls back to ``$EVALHYDRA_REGISTRY``, then ``./registry``, then the packaged
    registry.
    """
    value = os.environ.get(ENV_VAR, "registry")
    for item in overrides:
        key, sep, rest = item.partition("=")
        if sep and key.lstrip("+~") == "registry":
            value = rest.strip("'\"")
    _ACTIVE["root"] = resolve_registry_root(value)
    return _ACTIVE["root"]


def active_root() -> Path:
    """The registry selected by the last :func:`activate` (default if none)."""
    if "root" not in _ACTIVE:
        activate([])
    return _ACTIVE["root"]


def registry_options(root: Path | None = None) -> tuple[Registry, dict[str, list[str]]]:
    """A registry (the active one by default) and its option names per group (``service``, ``eval``)."""
    registry = load_registry(root or active_root())
    evals = list(registry.evals) + [g for g in registry.groups() if g not in registry.evals]
    return registry, {"service": list(registry.services), "eval": evals}


def literal(value: Any) -> Any:
    """``value`` with every ``${`` in its strings escaped for OmegaConf.

    A registry is zig_eval's JSON, not a Hydra config: ``Price is ${price}`` in a prompt is
    text to send, and ``${oc.env:SECRET}`` must not be resolved (and sent, and stored).
    """
    if isinstance(value, str):
        return value.replace("${", "\\${")
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def service_option(registry: Registry, name: str) -> dict[str, Any]:
    """The ``service`` node for a services.json entry (strings literal: see :func:`literal`)."""
    return literal(dict(registry.services[name]))


def eval_option(registry: Registry, name: str) -> dict[str, Any]:
    """The ``eval`` node for an eval id, or a suite node for a group.

    Raises:
        EvalHydraError: A file of the group (or the eval's own) does not load: selected, it stops
            the run.
    """
    if name in registry.evals:
        return _eval_node(registry.evals[name])
    broken = registry.broken_for(name)
    if broken is not None:
        raise broken
    members = registry.groups().get(name)
    if not members:
        raise EvalHydraError(f"Unknown eval '{name}'.")
    if len(members) == 1:
        return _eval_node(registry.evals[members[0]])
    return {
        "id": name,
        "group": name,
        "description": f"Every eval of group {name}: {', '.join(members)}",
        "include": members,
    }


def _eval_node(spec: dict[str, Any]) -> dict[str, Any]:
    return literal({k: v for k, v in spec.items() if k not in ("source", "base_dir", "wire")})
