"""Atomic file writes: a temp file in the target's directory, then ``os.replace``.

Readers never see a half-written report, and a failed write leaves the old
file (and no temp file) behind.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

__all__ = ["FILE_MODE", "finite_json", "stream_atomic", "write_json_atomic", "write_text_atomic"]


def _file_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


#: The mode of a new file under the process umask (0644 under umask 022), read once at import.
FILE_MODE = _file_mode()


def stream_atomic(path: Path, fill: Callable[[TextIO], Any]) -> None:
    """Let ``fill`` write the file's text to a handle; publish it only if ``fill`` succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; a report is as readable as any new file
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            fill(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` atomically."""
    stream_atomic(path, lambda out: out.write(text))


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON (indent 2, UTF-8, trailing newline) atomically; a NaN or an infinity
    (which JSON cannot hold) is written as ``null``."""
    try:
        text = json.dumps(obj, indent=2, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:  # a non-finite number from a store an older evalhydra wrote
        text = json.dumps(finite_json(obj), indent=2, ensure_ascii=False, default=str)
    write_text_atomic(path, text + "\n")


def finite_json(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by None (containers copied)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    return value
