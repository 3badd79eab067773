"""Matcher files named by an eval in evalhydra's own format, placed where they were written.

A rubric prompt, a JSON schema file or a validator named by a YAML eval (or a ``--config-dir``
eval) is found as a dataset is (:func:`~evalhydra.registry.datasets.locate_file`: beside that
file first, then at the registry root) and rewritten as the matchers read paths: relative to the
registry root when it is inside it (so a cell's key is the same on every machine), else absolute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.registry.datasets import locate_file
from evalhydra.registry.definitions import MATCHER_FILE_OPTIONS

__all__ = ["place_matcher_files"]


def place_matcher_files(matcher: dict[str, Any], base_dir: str | Path | None, root: Path) -> dict[str, Any]:
    """``matcher`` with each file option found beside ``base_dir`` (and not at ``root``) rewritten;
    composite parts too. Unchanged without a ``base_dir`` (a zig_eval eval)."""
    if base_dir is None or not isinstance(matcher, dict):
        return matcher
    out = dict(matcher)
    if isinstance(out.get("parts"), list):
        out["parts"] = [place_matcher_files(part, base_dir, root) for part in out["parts"]]
    key = MATCHER_FILE_OPTIONS.get(str(out.get("kind")))
    value = out.get(key) if key else None
    if key and isinstance(value, str) and value.strip() and not Path(value).is_absolute():
        out[key] = _placed(value.strip(), Path(base_dir), root)
    return out


def _placed(rel: str, base: Path, root: Path) -> str:
    """Where :func:`~evalhydra.registry.datasets.locate_file` finds ``rel`` (beside the eval's
    file, then the registry root), as a registry-relative path when it is inside the registry;
    ``rel`` itself when nothing is found (the matcher's own check says why)."""
    try:
        found = locate_file(root, rel, base, where="", what="matcher file")
    except EvalHydraError:
        return rel
    real_root = root.resolve()
    return found.relative_to(real_root).as_posix() if found.is_relative_to(real_root) else str(found)
