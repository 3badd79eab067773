"""``python -m evalhydra`` / ``evalhydra``: subcommands first, Hydra otherwise.

Hydra owns ``sys.argv`` and would parse a bare word such as ``report`` as a
broken override, so subcommands are dispatched before Hydra starts. Each side
is imported only when chosen: the store commands start without loading Hydra.
"""

from __future__ import annotations

import os
import signal
import sys

from evalhydra import __version__
from evalhydra.cli.commands import SUBCOMMANDS, usage

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Dispatch to a subcommand or to the Hydra app; exits with the run's code.

    A Ctrl-C outside a run's own handling (while reports are written, say) exits 130
    without a traceback; what was stored stays stored.
    """
    try:
        _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a further Ctrl-C must not cut the exit short
        print("interrupted: results stored so far are kept; run the same command again to resume.",
              file=sys.stderr)
        raise SystemExit(130) from None


def _main(args: list[str]) -> None:
    if args[:1] in (["--version"], ["-V"]):
        print(f"evalhydra {__version__}")
        raise SystemExit(0)
    if args and args[0] in SUBCOMMANDS:
        raise SystemExit(_subcommand(args))
    from evalhydra.cli.app import run_app  # Hydra and the runner: only for a run

    if args[:1] in (["-h"], ["--help"]):
        print(usage())
    raise SystemExit(run_app(args))


def _subcommand(args: list[str]) -> int:
    if args[0] == "rejudge":  # takes Hydra overrides after its options
        from evalhydra.cli.rejudge import main as rejudge_main

        return rejudge_main(args[1:])
    from evalhydra.cli.store_commands import main as store_main

    try:
        code = store_main(args)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `evalhydra results latest | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    return code


if __name__ == "__main__":
    main()
