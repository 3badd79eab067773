"""The exit codes: a contract a CI job can gate on (docs/ci.md).

One :class:`~enum.IntEnum`, used by every command (a run, a sweep, ``rejudge``,
``compare`` and the store commands), so no caller spells a bare number.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode"]


class ExitCode(IntEnum):
    """What an evalhydra command exits with.

    Attributes:
        OK: Measured, and every gate passed.
        GATE: Measured, and a gate failed (a pass rate under ``run.fail_under``, a regression).
        USAGE: A problem the user can fix (config, arguments, paths); nothing was run.
        UNMEASURED: The run could not measure (an eval × target without a scored cell, or
            more than ``run.max_error_rate`` of its cells infrastructure errors).
        INTERRUPTED: Stopped by Ctrl-C or SIGTERM; what was stored stays stored.
    """

    OK = 0
    GATE = 1
    USAGE = 2
    UNMEASURED = 3
    INTERRUPTED = 130
