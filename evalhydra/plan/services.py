"""The services a run calls besides the one under test: judges and simulated users, read from the
service files (``service/*.yaml`` of every config directory, then the registry's)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalhydra.compose.compose import config_dirs
from evalhydra.config.schema import Config, ServiceConfig
from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.matchers.factory import judge_services_of
from evalhydra.plan.model import EvalPlan
from evalhydra.plan.placement import judge_service_config
from evalhydra.registry.definitions import Registry

__all__ = ["known_service_sources", "other_services"]


def other_services(conf: Config, registry: Registry, evals: list[EvalPlan],
                   service: ServiceConfig) -> dict[str, ServiceConfig]:
    """Every service the evals name besides ``service`` (their judges, their simulated users), by
    name, as configured; a judge's with the run's ``judge`` settings.

    Raises:
        EvalHydraError: A named service has no file, with the names there are.
    """
    names = set().union(*(judge_services_of(e.matcher) for e in evals))
    users = {e.user.service for e in evals if e.user is not None and e.user.service} - {service.name}
    if not names and not users and not conf.judge_service:
        return {}  # no judge or simulated user named anywhere: the service files need not be read
    known = known_service_sources(registry)
    judges = {}
    for name in sorted(users):  # a simulated user's service, as its file says
        judges[name] = _known(known, name, "user.service", service)()
    for name in sorted(names):
        if name == service.name:
            judges[name] = judge_service_config(service, conf.judge)
        elif name in known:
            judges[name] = judge_service_config(known[name](), conf.judge)
        else:
            raise EvalHydraError(
                f"Judge service '{name}' not found (JudgeServiceNotFound).",
                did_you_mean(name, [*known, service.name]) + "\nSet judge_service=NAME to choose another.",
            )
    if conf.judge_service and conf.judge_service != service.name:
        _known(known, conf.judge_service, "judge_service", service)  # a typo, even unused
    return judges


def _known(known: dict[str, Callable[[], ServiceConfig]], name: str, key: str,
           service: ServiceConfig) -> Callable[[], ServiceConfig]:
    if name not in known:
        raise EvalHydraError(f"{key}={name}: there is no service of that name.",
                             did_you_mean(name, [*known, service.name]))
    return known[name]


def known_service_sources(registry: Registry | None,
                          extra_dirs: Sequence[Path] = ()) -> dict[str, Callable[[], ServiceConfig]]:
    """The configured services (``service/*.yaml`` of every config directory and of
    ``extra_dirs``, then the registry's), each read and type-checked only when asked for."""
    base = OmegaConf.structured(ServiceConfig)
    found: dict[str, Callable[[], ServiceConfig]] = {}
    for directory in [*config_dirs(), *extra_dirs]:
        for path in sorted(Path(directory, "service").glob("*.yaml")):
            found[path.stem] = partial(_service_from, base, path)
    for name, spec in (registry.services if registry else {}).items():
        found[name] = partial(_service_from, base, spec)
    return found


def _service_from(base: DictConfig, source: Path | Any) -> ServiceConfig:
    node = OmegaConf.merge(base, OmegaConf.load(source) if isinstance(source, Path) else source)
    return OmegaConf.to_object(node)  # type: ignore[return-value]
