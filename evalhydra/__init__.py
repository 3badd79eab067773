"""evalhydra: run declarative LLM eval suites, store every result in SQLite, report and compare.

:mod:`~evalhydra.__main__` is ``python -m evalhydra`` and the ``evalhydra`` console script
(subcommands first, Hydra otherwise).

The package is layered; each layer imports only those below it (import-linter's
contract in ``pyproject.toml`` enforces it)::

    testing                          test helpers; nothing in the package imports them
    cli | api                        argv and printing | the Python API (evaluate, rejudge)
    viewer                           evalhydra view: a read-only web app over the store, live
    job                              one job end to end: run or rejudge, reports, gates, exit codes
    reports                          the files and terminal text written from the analyses
    execute | probe                  the trio runner: cells in a nursery, one store writer | server probes
    plan                             a composed config validated into a frozen plan; pre-flight checks
    services | agents | matchers | telemetry   who answers | agent CLIs | scoring | cells as spans
    http                             transports behind httpx's interface
    compose                          conf/ and the registry composed by Hydra
    analysis                         SQL over the store: figures, comparisons, gates, sample sizes
    registry | store                 eval definitions and datasets on disk | the SQLite store
    config                           the typed config schema
    stats                            statistics over numbers: intervals, paired tests, power, pass@k
    core                             errors, value types, messages, strict JSON, trio helpers
"""

import importlib.util
import sys
from pathlib import Path

from evalhydra.core.version import __version__

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


__all__ = ["Eval", "EvalHydraError", "EvalResult", "__version__", "evaluate", "rejudge"]

#: The public names imported on first use, and their modules: the store subcommands
#: start without loading Hydra and the runner.
_LAZY = {"Eval": "evalhydra.api", "EvalHydraError": "evalhydra.core.errors", "EvalResult": "evalhydra.api",
         "evaluate": "evalhydra.api", "rejudge": "evalhydra.api"}


def __getattr__(name: str) -> object:
    """The public names of :data:`_LAZY`, imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
