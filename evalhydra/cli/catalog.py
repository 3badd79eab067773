"""``evalhydra list``: every selectable service and eval, from ``conf/`` and the registry."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from evalhydra.agents.loader import load_cases
from evalhydra.compose.compose import config_dirs
from evalhydra.config.schema import ServiceConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.registry.datasets import iter_cases
from evalhydra.registry.definitions import Registry

__all__ = ["eval_rows", "service_rows"]


def service_rows(registry: Registry) -> list[dict[str, Any]]:
    """One row per selectable service: name, kind, model, where it is defined."""
    rows = {}
    for name, spec, source in [*_yaml_options("service"), *_registry_services(registry)]:
        svc = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ServiceConfig), spec))
        assert isinstance(svc, ServiceConfig)
        kind = "agent CLI" if svc.kind == "command" else ("mock" if svc.mock.enabled else "chat")
        endpoint = "built-in mock" if svc.mock.enabled else (svc.base_url or svc.cli_name or "")
        rows[name] = {"service": name, "kind": kind, "model": svc.model or svc.default_model,
                      "endpoint": endpoint, "defined in": source}
    return list(rows.values())


def eval_rows(registry: Registry) -> list[dict[str, Any]]:
    """One row per selectable eval (groups first select all their evals): id, kind, cases, description."""
    rows = []
    for name, spec, source in _yaml_options("eval"):
        rows.append(_eval_row(name, spec, registry.root, source))
    for eval_id, spec in registry.evals.items():
        rows.append(_eval_row(eval_id, spec, registry.root, "registry"))
    return rows


def _eval_row(name: str, spec: Any, root: Path, source: str) -> dict[str, Any]:
    kind = "agent" if spec.get("cases") is not None else "chat"
    return {"eval": name, "group": spec.get("group") or name.split(".")[0], "kind": kind,
            "cases": _case_count(spec, root), "trials": spec.get("default_run_count") or 1,
            "description": (spec.get("description") or "")[:70], "defined in": source}


def _case_count(spec: Any, root: Path) -> int | str:
    try:
        if spec.get("cases") is not None:
            return sum(1 for _ in load_cases(spec["cases"], root))
        base = Path(spec["base_dir"]) if spec.get("base_dir") else None
        return sum(1 for _ in iter_cases(root, spec["dataset_path"], check_attachments=False, base=base))
    except EvalHydraError:
        return "invalid"


def _yaml_options(group: str) -> Iterable[tuple[str, Any, str]]:
    for directory in config_dirs():
        for path in sorted(Path(directory, group).glob("*.yaml")):
            yield path.stem, OmegaConf.to_container(OmegaConf.load(path)), "conf"


def _registry_services(registry: Registry) -> Iterable[tuple[str, Any, str]]:
    for name, spec in registry.services.items():
        yield name, spec, "registry"
