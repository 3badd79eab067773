"""The one error type users see.

Every problem a user can fix (bad YAML or JSON, a missing dataset, a typo in a
service name, an unset API key variable, an unsafe attachment path) raises an
:class:`EvalHydraError`. The command line prints it without a traceback and
exits with status 2. Programming errors propagate as ordinary exceptions.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["EvalHydraError", "did_you_mean"]


class EvalHydraError(Exception):
    """A user-fixable problem: what is wrong, where, and how to fix it.

    Args:
        message: What is wrong, naming the file and line or the config key.
        hint: The fix, or the valid options.
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n{hint}")


def did_you_mean(name: str, options: Iterable[str]) -> str:
    """Return a hint naming the closest options and listing all of them.

    Args:
        name: The unknown name the user gave.
        options: The valid names.

    Returns:
        A one- or two-line hint, e.g. ``Did you mean: mock? Available: mock, mock_slow``.
    """
    opts = sorted(set(options))
    close = difflib.get_close_matches(name, opts, n=3, cutoff=0.6)
    listing = f"Available: {', '.join(opts)}" if opts else "No options are defined."
    return f"Did you mean: {', '.join(close)}?\n{listing}" if close else listing
