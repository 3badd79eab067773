"""evalhydra: run declarative LLM eval suites, store every result in SQLite, report and compare."""

import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"

#: Data packages the wheel installs inside ``evalhydra/``, and the checkout folders they come from.
_DATA_PACKAGES = {"conf": "conf", "registry_data": "registry"}


def _map_checkout_data_packages() -> None:
    """Make ``evalhydra.conf`` and ``evalhydra.registry_data`` importable from a source checkout.

    The wheel (and an editable install) puts the top-level ``conf/`` and ``registry/``
    inside the package. Run from a checkout without an editable install (``pip install .``
    then ``python -m evalhydra`` in the checkout), Python imports this package from the
    checkout, where those folders sit beside it; this maps them the way the wheel does.
    """
    checkout = Path(__file__).resolve().parent.parent
    for name, folder in _DATA_PACKAGES.items():
        init = checkout / folder / "__init__.py"
        if importlib.util.find_spec(f"{__name__}.{name}") is not None or not init.is_file():
            continue
        spec = importlib.util.spec_from_file_location(
            f"{__name__}.{name}", init, submodule_search_locations=[str(init.parent)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)


_map_checkout_data_packages()


def __getattr__(name: str) -> object:
    """``evalhydra.evaluate`` and ``evalhydra.EvalResult``, imported on first use: the store
    subcommands start without loading Hydra and the runner (about 0.2 s)."""
    if name in ("evaluate", "EvalResult"):
        from evalhydra import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
