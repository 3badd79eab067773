"""Files a user names on the command line (``--out``), written or refused with a clear error."""

from __future__ import annotations

from pathlib import Path

from evalhydra.core.errors import EvalHydraError

__all__ = ["write_output"]


def write_output(path: Path, text: str, option: str = "--out") -> None:
    """Write ``text`` to ``path``, making its folder if it is new.

    Raises:
        EvalHydraError: The path cannot be written (a file where its folder would be, no
            permission, a full disk), naming the option and the path.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        blocked = isinstance(exc, FileExistsError | NotADirectoryError)
        why = "a file stands where its folder would be" if blocked else exc.strerror or str(exc)
        fix = "Choose a file in a folder you can write to."
        raise EvalHydraError(f"{option} {path}: {why}.", fix) from None
