"""What the command line does first, before it imports anything heavy.

``import httpx`` also imports httpx's own command-line client (``httpx._main``),
which pulls in ``click``, ``rich`` and ``pygments`` whenever they are installed
(they are: ``sqlite-utils`` needs click and evalhydra needs rich). That is more
than half of httpx's import time (``bench/startup.py``), and evalhydra never
runs that client (encode/httpx#3547 moves the import out; until it lands, this skips it).

Start-up also makes a few hundred thousand objects (Hydra, OmegaConf, the
libraries' modules, two compositions of the config), and the cyclic garbage
collector walks them again and again while they pile up, though none of them is
garbage. ``python -m evalhydra`` stops it first thing (``evalhydra.__main__``,
before this package is imported), and :func:`resume_gc` turns it back on when the
job begins, after moving what start-up made out of its reach (``gc.freeze``).
"""

from __future__ import annotations

import gc
import importlib
import sys

__all__ = ["import_httpx_without_its_cli", "import_sqlite_utils_without_numpy_or_pandas", "resume_gc"]


def _import_without(name: str, blocked: tuple[str, ...]) -> None:
    """Import ``name`` while the modules ``blocked`` cannot be imported; a no-op when ``name``
    or any of them is imported already. They are importable again afterwards, and if ``name``
    cannot do without them after all, it is imported again with them."""
    if name in sys.modules or any(module in sys.modules for module in blocked):
        return
    for module in blocked:
        sys.modules[module] = None  # type: ignore[assignment]  # makes `import module` raise ImportError
    try:
        importlib.import_module(name)
    except ImportError:
        pass  # imported again below, with nothing blocked
    finally:
        for module in blocked:
            if sys.modules.get(module, ...) is None:
                del sys.modules[module]
    importlib.import_module(name)  # a no-op after the import above worked


def import_httpx_without_its_cli() -> None:
    """Import httpx without its CLI module; a no-op when httpx is already imported.

    While httpx imports, ``httpx._main`` is marked as not importable, so httpx takes
    the fallback it has for installs without the CLI extras (``httpx.main`` then
    only prints how to install them). The mark is removed afterwards, so an explicit
    ``import httpx._main`` later still works.
    """
    _import_without("httpx", ("httpx._main",))


def import_sqlite_utils_without_numpy_or_pandas() -> None:
    """Import sqlite-utils without NumPy and pandas; a no-op when any of them is imported already.

    sqlite-utils imports both whenever they are installed, only to map their value
    types to column types when it creates a table from values. evalhydra's tables are
    declared column by column and its rows are written with plain ``sqlite3``, so that
    mapping is never used, while NumPy's import alone is a visible share of start-up
    (``python -X importtime``), pandas far more. Both stay importable for anything else
    that wants them.
    """
    _import_without("sqlite_utils", ("numpy", "pandas"))


def resume_gc() -> None:
    """Turn the cyclic garbage collector back on, leaving what start-up made out of its walks.

    A no-op when it is on already (a launcher's worker process, a second job of a sweep).
    """
    if gc.isenabled():
        return
    gc.freeze()  # everything alive now lives as long as the process: no collection needs to walk it
    gc.enable()
