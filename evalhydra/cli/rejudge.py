"""``evalhydra rejudge RUN_ID [OVERRIDES...]``: the arguments and what is printed.

The re-judge itself is :func:`evalhydra.job.rejudge.rejudge`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from evalhydra.cli.commands import CommandParser
from evalhydra.config.defaults import DEFAULT_STORE_PATH
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode
from evalhydra.job.rejudge import override_key, rejudge

__all__ = ["add_arguments", "build_parser", "main", "run_from_args"]


DESCRIPTION = ("Score the stored outputs of a run again (judges are called, the candidate service never "
               "is) and store the verdicts as a new run linked to the original.")
EPILOG = ("Example: evalhydra rejudge latest matcher=includes matcher.case_sensitive=false\n"
          "         evalhydra rejudge eval-quality-1a2b3c4d judge_service=mock_judge")


def add_arguments(parser: argparse.ArgumentParser, *, store: bool = True) -> None:
    """Add rejudge's arguments (``store=False`` when the caller adds ``--store`` itself)."""
    parser.add_argument("run_id", metavar="RUN_ID", help="run id, unique prefix, or 'latest'")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                        help="Hydra overrides on top of the run's own (matcher=…, judge_service=…)")
    if store:
        parser.add_argument("--store", default=DEFAULT_STORE_PATH, metavar="PATH",
                            help=f"SQLite store (default: {DEFAULT_STORE_PATH})")
    parser.add_argument("--out", metavar="DIR",
                        help="report directory (default: <store dir>/runs/<new run id>)")


def build_parser() -> argparse.ArgumentParser:
    """The ``evalhydra rejudge`` argument parser."""
    parser = CommandParser(prog="evalhydra rejudge", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    """Run ``evalhydra rejudge``; return the exit code (:class:`~evalhydra.job.exit_codes.ExitCode`).

    Options and overrides may be given in any order (``RUN_ID --store X matcher=includes``).

    Args:
        argv: The arguments after ``rejudge``.
    """
    return run_from_args(build_parser().parse_intermixed_args(list(argv)))


def run_from_args(args: argparse.Namespace) -> int:
    """Run a parsed ``rejudge`` command (``run_id``, ``overrides``, ``store``, ``out``)."""
    if any(override_key(o) == "trials" for o in args.overrides):
        print("note: trials= does not apply to rejudge; every stored output is judged once "
              "(re-judge again to sample the judge again).", file=sys.stderr)
    try:
        result = rejudge(args.store, args.run_id, args.overrides, out=Path(args.out) if args.out else None)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    tally = result.tally
    print(f"rejudged {tally.parent_run_id} -> {result.run_id}: {tally.judged} judged again, "
          f"{tally.copied} copied (generation failed), {tally.changed} verdict(s) changed")
    for eval_id, count in tally.skipped_evals.items():
        print(f"warning: skipped {count} result(s) of eval '{eval_id}': not in the config", file=sys.stderr)
    return result.exit_code
