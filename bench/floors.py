"""The minimal apps the benches take their floors from, as source to write and run.

``bench/startup.py`` and ``bench/shard_agents.py`` both time a minimal
``@hydra.main`` app, bare and with the libraries evalhydra's design fixes
imported and touched once: the floor of any app built on that design.
"""

from __future__ import annotations

import os
import textwrap

__all__ = ["CACHING_ENV", "TOUCH_LIBRARIES", "hydra_app"]

#: The environment the benches run their processes in: Python writes its bytecode caches, as on
#: a user's machine. Where ``PYTHONDONTWRITEBYTECODE`` is set (these development machines set
#: it), an editable install would otherwise compile evalhydra's modules from source at every
#: start (~0.14 s here) while the floors' small apps compile almost nothing.
CACHING_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}

#: Statements that import trio, httpx, sqlite-utils and tabulate and use each once
#: (httpx without its CLI module, as :mod:`evalhydra.cli.startup` imports it).
TOUCH_LIBRARIES = """\
import sys
sys.modules["httpx._main"] = None
import httpx, sqlite_utils, tabulate, trio
trio.run(trio.sleep, 0)
sqlite_utils.Database(memory=True)["t"].insert({"a": 1})
assert httpx.Request("GET", "http://127.0.0.1/") and tabulate.tabulate([[1]])
"""

_APP = """\
import gc
import time

gc.disable()  # as evalhydra's command line does until its job begins (evalhydra.cli.startup)

import hydra


@hydra.main(version_base=None, config_path=None)
def main(cfg) -> None:
    gc.freeze()
    gc.enable()
{body}


if __name__ == "__main__":
    main()
"""


def hydra_app(body: str) -> str:
    """A minimal ``@hydra.main`` app (no config file: keys come as ``+key=value``) whose job runs
    ``body``, statements that see the config as ``cfg``. Imports in ``body`` happen in the job,
    so in a launcher's worker too (joblib pickles the job function by value). Like evalhydra, it
    keeps the cyclic garbage collector off until its job begins: the floor is as fast as the
    trick makes any Hydra app."""
    return _APP.format(body=textwrap.indent(body, "    "))
