"""``.env`` files: read from the current folder and then from the project a run names, and where
each value came from, so a fix line can say why a URL or key is what it is.

The current folder's file is read first and a variable already set is never replaced
(python-dotenv's ``override=False``), so the environment wins, then the current folder, then the
project (``--config-dir``'s parent, the registry root).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["env_source", "load_env_files", "project_folders", "value_origin"]

#: Variable name -> the ``.env`` file that set it (those set before evalhydra started are absent).
_SOURCES: dict[str, Path] = {}
#: Every ``.env`` file looked for, in order (for "no .env was found in …").
_LOOKED: list[Path] = []

_ENV_REF = re.compile(r"\$\{oc\.env:\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:,([^}]*))?\}")


def project_folders(args: Sequence[str]) -> list[Path]:
    """The folders of the project a command line names: ``--config-dir DIR``'s parent, and
    ``registry=PATH`` (else ``$EVALHYDRA_REGISTRY``)."""
    folders: list[Path] = []
    for i, arg in enumerate(args):
        value = None
        if arg in ("--config-dir", "-cd") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--config-dir="):
            value = arg.split("=", 1)[1]
        if value:
            folders.append(Path(value).expanduser().absolute().parent)
    registry = next((a.split("=", 1)[1] for a in args if a.lstrip("+~").startswith("registry=")),
                    os.environ.get("EVALHYDRA_REGISTRY"))
    if registry:
        folders.append(Path(registry).expanduser())
    return folders


def load_env_files(args: Sequence[str] = ()) -> list[Path]:
    """Read ``.env`` in the current folder, then in each project folder of ``args``
    (:func:`project_folders`), never over a variable already set; return the files read."""
    read = []
    seen: set[Path] = set()
    for folder in [Path("."), *project_folders(args)]:
        path = (folder / ".env").resolve()
        if path in seen:
            continue
        seen.add(path)
        _LOOKED.append(path)
        if not path.is_file():
            continue
        read.append(path)
        from dotenv import dotenv_values  # only when a file is there to read (start-up)

        for name, value in dotenv_values(path).items():
            if value is not None and name not in os.environ:
                os.environ[name] = value
                _SOURCES[name] = path
    return read


def env_source(name: str | None) -> str:
    """Where variable ``name`` came from: ``the environment``, ``PATH/.env``, or "" when unset."""
    if not name or not os.environ.get(name, "").strip():
        return ""
    found = _SOURCES.get(name)
    return str(found) if found is not None and os.environ.get(name) is not None else "the environment"


def value_origin(raw: object, key: str) -> str:
    """Where a config value ``key`` (``service.base_url``) came from, given its text before
    interpolation: ``$NAME from the environment``, ``$NAME from PATH/.env``, or ``the service
    file's default ($NAME is unset; no .env sets it)``; ``key as set in the config`` otherwise."""
    found = _ENV_REF.search(raw) if isinstance(raw, str) else None
    if found is None:
        return f"{key} as set in the config"
    name = found.group(1)
    source = env_source(name)
    if source:
        return f"${name} from {source}"
    looked = ", ".join(str(p) for p in dict.fromkeys(_LOOKED)) or "the current folder"
    unset = f"${name} is unset; no .env sets it: looked in {looked}"
    return f"the service file's default for {key} ({unset})" if found.group(2) is not None else unset
