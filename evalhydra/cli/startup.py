"""What the command line does first, before it imports anything heavy.

``import httpx`` also imports httpx's own command-line client (``httpx._main``),
which pulls in ``click``, ``rich`` and ``pygments`` whenever they are installed
(they are: ``sqlite-utils`` needs click and evalhydra needs rich). That is more
than half of httpx's import time (median of 9 on the 2-core development
machine: 223 ms with it, 117 ms without), and evalhydra never runs that
client (encode/httpx#3547 moves the import out; until it lands, this skips it).
"""

from __future__ import annotations

import sys

__all__ = ["import_httpx_without_its_cli"]

_HTTPX_CLI = "httpx._main"


def import_httpx_without_its_cli() -> None:
    """Import httpx without its CLI module; a no-op when httpx is already imported.

    While httpx imports, ``httpx._main`` is marked as not importable, so httpx takes
    the fallback it has for installs without the CLI extras (``httpx.main`` then
    only prints how to install them). The mark is removed afterwards, so an explicit
    ``import httpx._main`` later still works.
    """
    if "httpx" in sys.modules or _HTTPX_CLI in sys.modules:
        return
    sys.modules[_HTTPX_CLI] = None  # type: ignore[assignment]  # makes `from ._main import main` fail
    try:
        import httpx  # noqa: F401
    finally:
        if sys.modules.get(_HTTPX_CLI) is None:
            del sys.modules[_HTTPX_CLI]
