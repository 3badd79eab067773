"""``python -m evalhydra`` / ``evalhydra``: subcommands first, Hydra otherwise.

Hydra owns ``sys.argv`` and would parse a bare word such as ``report`` as a
broken override, so subcommands are dispatched before Hydra starts. Each side
is imported only when chosen: the store commands start without loading Hydra.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable

from evalhydra import __version__
from evalhydra.core.envfiles import load_env_files
from evalhydra.job.exit_codes import ExitCode

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Dispatch to a subcommand or to the Hydra app; exits with the run's code.

    The cyclic garbage collector is off until the job begins (or the subcommand
    runs): start-up makes a few hundred thousand objects and none of them is garbage
    (:func:`evalhydra.cli.startup.resume_gc`). So the command line's own modules are
    imported here, after it is off.

    A Ctrl-C outside a run's own handling (while reports are written, say) exits 130
    without a traceback; what was stored stays stored.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a further Ctrl-C must not cut the exit short
        print("interrupted: results stored so far are kept; run the same command again to resume.",
              file=sys.stderr)
        raise SystemExit(ExitCode.INTERRUPTED) from None
    finally:
        if collecting:
            gc.enable()  # an error before the job (exit 2), --help: as the caller had it


def _main(args: list[str]) -> None:
    # keys and URLs for a project's services: the current folder's .env, then the project's
    # (--config-dir's parent, the registry), never over a variable that is set; read at call
    # time, never stored
    load_env_files(args)
    if args[:1] in (["--version"], ["-V"]):
        print(f"evalhydra {__version__}")
        raise SystemExit(ExitCode.OK)
    from evalhydra.cli.commands import SUBCOMMANDS, usage  # imports httpx (evalhydra.cli)

    if args[:1] == ["check"]:
        if args[1:2] in (["-h"], ["--help"]):
            print(CHECK_HELP)
            raise SystemExit(ExitCode.OK)
        from evalhydra.cli.jobs import check_only

        check_only()
        args = [*args[1:], "hydra.output_subdir=null", "hydra.run.dir=.", "hydra/job_logging=none",
                "hydra/hydra_logging=none"]  # stdout holds the check's report alone
    elif args and args[0] in SUBCOMMANDS:
        raise SystemExit(_subcommand(args))
    if args[:1] == ["run"]:  # `evalhydra run eval=smoke`, as `inspect eval` and `promptfoo eval` read
        args = args[1:]
    from evalhydra.cli.app import run_app  # Hydra and the runner: only for a run

    if args[:1] in (["-h"], ["--help"]):

        def show_help() -> int:
            print(usage())
            try:
                code = run_app(args)  # Hydra's own help: the config groups
            except SystemExit as done:  # Hydra ends its help with sys.exit(0)
                code = int(done.code or 0)
            if code == ExitCode.OK:
                from evalhydra.cli.app import options_help

                print(options_help(args[1:]))
            return code

        raise SystemExit(_to_a_reader_that_may_leave(show_help))
    raise SystemExit(run_app(args))


#: ``evalhydra check --help``.
CHECK_HELP = """usage: evalhydra check [HYDRA_OVERRIDES...]

Send one minimal chat request (and GET /models, where served) to the run's service and each of
its judges, as the same overrides would run them: reachable, the key accepted, the model served
(else the models that are), and the latency; start each MCP server a tool loop names and list its
tools. Exit 0 when everything answered, 3 when something did not. Nothing is stored; stdout holds
the report alone, each problem is an error: line on stderr with its fix.

Example: evalhydra check service=openai service.model=gpt-4o-mini
         evalhydra check --config-dir conf service=my_model eval=capitals registry=.
"""


def _subcommand(args: list[str]) -> int:
    from evalhydra.cli.startup import resume_gc

    if args[0] == "init":
        from evalhydra.cli.init import main as init_main

        return init_main(args[1:])

    if args[0] == "probe":  # takes Hydra overrides after its options
        from evalhydra.cli.probe import main as probe_main

        return probe_main(args[1:])
    if args[0] == "rejudge":  # takes Hydra overrides after its options
        from evalhydra.cli.rejudge import main as rejudge_main

        resume_gc()
        return rejudge_main(args[1:])
    from evalhydra.cli.store_commands import main as store_main

    resume_gc()
    return _to_a_reader_that_may_leave(lambda: store_main(args))


def _to_a_reader_that_may_leave(command: Callable[[], int]) -> int:
    """Run ``command`` and return its code, or 0 when the reader of its output left first
    (``evalhydra results latest | head``, ``evalhydra --help | head``): no traceback."""
    try:
        code = command()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit
        code = ExitCode.OK
    return code


if __name__ == "__main__":
    main()
