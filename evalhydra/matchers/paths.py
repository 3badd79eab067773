"""Paths of matcher files (rubric prompts, schemas, validators).

A relative path follows zig_eval's rules: ``/`` and ``\\`` both split segments; empty, ``.``
and ``..`` segments are rejected; and the real path must stay under the registry root
(symlinks are fine when they stay inside). An absolute path is taken as written: only
evalhydra's own eval formats can give one (the plan resolves a file beside a ``--config-dir``
eval to its absolute path; the registry loader refuses absolute paths in zig_eval files).
"""

from __future__ import annotations

from pathlib import Path

from evalhydra.core.errors import EvalHydraError

__all__ = ["resolve_registry_path"]


def _check_segments(rel: str, where: str, what: str) -> list[str]:
    if not rel or rel.startswith("\\") or (len(rel) > 1 and rel[1] == ":"):
        raise EvalHydraError(
            f"{where}: {what} path {rel!r} must be relative to the registry root",
            "Write it like 'prompts/evaluator.prompt.md'.",
        )
    segments = rel.replace("\\", "/").split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise EvalHydraError(
                f"{where}: {what} path {rel!r} has an empty, '.' or '..' segment",
                "Registry paths may not leave the registry root or contain '//'.",
            )
    return segments


def resolve_registry_path(root: Path, rel: str, *, where: str, what: str) -> Path:
    """Resolve a registry-relative path to an existing file inside ``root``.

    Args:
        root: The registry root.
        rel: The path as written in the config.
        where: The config location, for error messages.
        what: What the file is ("rubric prompt", "schema", …), for error messages.

    Returns:
        The resolved absolute path.

    Raises:
        EvalHydraError: The path is unsafe, escapes the root, or is not a file.
    """
    if rel.startswith("/"):
        if not Path(rel).is_file():
            raise EvalHydraError(f"{where}: {what} file {rel!r} not found")
        return Path(rel).resolve()
    segments = _check_segments(rel, where, what)
    base = root.resolve()
    path = base.joinpath(*segments).resolve()
    if not path.is_relative_to(base):
        raise EvalHydraError(f"{where}: {what} path {rel!r} resolves outside the registry root")
    if not path.is_file():
        raise EvalHydraError(f"{where}: {what} file {rel!r} not found under the registry root {root}")
    return path
