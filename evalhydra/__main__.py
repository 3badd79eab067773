"""``python -m evalhydra`` / ``evalhydra``: subcommands first, Hydra otherwise.

Hydra owns ``sys.argv`` and would parse a bare word such as ``report`` as a
broken override, so subcommands are dispatched before Hydra starts.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]

SUBCOMMANDS = {"runs", "report", "compare", "query", "results", "rejudge", "merge", "list"}

USAGE = """\
usage: evalhydra [HYDRA_OVERRIDES...]        run evals (python -m evalhydra --help for options)
       evalhydra -m service=a,b eval=smoke   sweep (Hydra multirun)
       evalhydra {runs,report,compare,query,results,rejudge,merge,list} [-h] ...
"""


def main(argv: list[str] | None = None) -> None:
    """Dispatch to a subcommand or to the Hydra app; exits with the run's code."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in SUBCOMMANDS:
        from evalhydra.cli import main as cli_main

        try:
            code = cli_main(args)
            sys.stdout.flush()
        except BrokenPipeError:  # e.g. `evalhydra results latest | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = 0
        raise SystemExit(code)
    from evalhydra.registry_source import activate

    try:
        activate(args)
    except Exception as exc:  # an unusable registry= path: report it like Hydra would
        from evalhydra.errors import EvalHydraError

        if not isinstance(exc, EvalHydraError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
    from evalhydra.app import exit_code, hydra_main

    sys.argv = [sys.argv[0], *args]
    hydra_main()
    raise SystemExit(exit_code())


if __name__ == "__main__":
    main()
