"""Hydra plugins: the ``evalhydra-registry://`` config source and the search-path entry for it.

See :mod:`evalhydra.compose.registry_options`; this module only adapts it to Hydra's
``ConfigSource`` and ``SearchPathPlugin`` interfaces.
"""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.errors import ConfigCompositionException
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

SCHEME = "evalhydra-registry"
_ENABLED: list[bool] = [False]


def enable() -> None:
    """Let :class:`EvalHydraSearchPath` add the registry (called by ``evalhydra.config.schema.register``).

    Until then the plugin does nothing, so other Hydra apps on the machine are unaffected.
    """
    _ENABLED[0] = True


class EvalHydraSearchPath(SearchPathPlugin):
    """Adds the active registry to every evalhydra search path (so ``--help`` lists its options).

    The entry names the registry's absolute path (``evalhydra-registry:///abs/registry``):
    launchers (joblib, submitit, Ray) carry the search path to their workers, so a worker
    serves the same registry without any process-global state.
    """

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        """Append ``evalhydra-registry://<active registry>`` once."""
        from evalhydra.compose.registry_options import active_root

        if _ENABLED[0] and not any(e.path.startswith(f"{SCHEME}://") for e in search_path.get_path()):
            search_path.append(provider=SCHEME, path=f"{SCHEME}://{active_root()}")


class EvalHydraRegistrySource(ConfigSource):
    """Serves ``service/*`` and ``eval/*`` options from the active registry."""

    GROUPS = ("service", "eval")

    @staticmethod
    def scheme() -> str:
        """The URL scheme of this source."""
        return "evalhydra-registry"

    def _options(self) -> tuple[object, dict[str, list[str]]]:
        from pathlib import Path

        from evalhydra.compose.registry_options import registry_options
        from evalhydra.core.errors import EvalHydraError

        try:
            return registry_options(Path(self.path))
        except EvalHydraError as exc:
            raise ConfigCompositionException(str(exc)) from None

    def _split(self, config_path: str) -> tuple[str, str]:
        path = config_path.strip("/")
        if path.endswith(".yaml"):
            path = path[: -len(".yaml")]
        group, _, name = path.partition("/")
        return group, name

    def available(self) -> bool:
        """Always available; an empty or missing registry simply has no options."""
        return True

    def is_group(self, config_path: str) -> bool:
        """``service`` and ``eval`` are groups here."""
        group, name = self._split(config_path)
        return group in self.GROUPS and not name

    def is_config(self, config_path: str) -> bool:
        """True for ``service/<name>`` and ``eval/<id-or-group>`` that exist."""
        group, name = self._split(config_path)
        if group not in self.GROUPS or not name:
            return False
        return name in self._options()[1][group]

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        """Option names of a group."""
        group, name = self._split(config_path)
        if group not in self.GROUPS or name or results_filter == ObjectType.GROUP:
            return []
        return sorted(self._options()[1][group])

    def load_config(self, config_path: str) -> ConfigResult:
        """Build the node for one option."""
        from evalhydra.compose.registry_options import eval_option, service_option
        from evalhydra.core.errors import EvalHydraError

        group, name = self._split(config_path)
        if not self.is_config(config_path):
            raise ConfigLoadError(f"Config not found: {config_path}")
        registry = self._options()[0]
        try:
            node = (service_option if group == "service" else eval_option)(registry, name)  # type: ignore[arg-type]
        except EvalHydraError as exc:
            raise ConfigCompositionException(str(exc)) from None
        return ConfigResult(
            provider="evalhydra-registry",
            path=f"{self.scheme()}://{self.path}",
            config=OmegaConf.create(node),
            header={"package": None},
        )
