"""``evalhydra power``: the cases × trials a comparison needs to detect a drop."""

from __future__ import annotations

import argparse

from evalhydra.analysis.samplesize import Assumptions, power_report
from evalhydra.cli.store_access import fraction, open_read_only, target_of
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode
from evalhydra.reports.power import render_power

__all__ = ["cmd_power", "configure_power"]


def cmd_power(args: argparse.Namespace) -> int:
    """How many cases × trials a comparison needs to detect a drop at a given power.

    With BASELINE CANDIDATE (targets as for compare), the variance comes from
    their stored per-case differences; with one TARGET, from its per-case pass
    fractions and an assumed correlation between two models' per-case pass
    probabilities (--correlation); with none, from --pass-rate, --case-sd and
    --correlation alone. More trials shrink only the within-case noise; only
    more cases shrink the between-case spread.

    Examples:
      evalhydra power latest --drop 0.05
      evalhydra power eval-smoke-1a2b3c4d eval-smoke-5e6f7a8b --trials 1,5,10
      evalhydra power --pass-rate 0.8 --drop 0.03
    """
    if len(args.targets) > 2:
        raise EvalHydraError("power takes at most two targets (BASELINE CANDIDATE).",
                             "See: evalhydra power --help")
    store = open_read_only(args) if args.targets else None
    targets = [target_of(store, t) for t in args.targets] if store else []
    assume = Assumptions(args.pass_rate, args.case_sd, args.correlation)
    doc = power_report(store.conn if store else None, targets, evals=args.eval or (), drop=args.drop,
                       power=args.power, trials=args.trials, assume=assume)
    print(render_power(doc, args.format))
    return ExitCode.OK


def _trial_counts(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: give trial counts like 1,3,5,10") from None


def configure_power(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="*", metavar="TARGET", help="none, one target, or BASELINE CANDIDATE")
    p.add_argument("--eval", action="append", metavar="ID", help="only this eval (repeatable)")
    p.add_argument("--drop", type=fraction, default=0.05, help="drop to detect (default 0.05 = 5 points)")
    p.add_argument("--power", type=float, default=0.8, help="power (default 0.8)")
    p.add_argument("--trials", type=_trial_counts, default=[1, 3, 5, 10],
                   help="trial counts (default 1,3,5,10)")
    p.add_argument("--pass-rate", type=fraction, default=0.7, help="assumed pass rate with no target (0.7)")
    p.add_argument("--case-sd", type=float, default=None,
                   help="assumed SD of per-case pass probabilities (default: √(p(1−p)/2))")
    p.add_argument("--correlation", type=float, default=0.5,
                   help="assumed correlation of two models' per-case pass probabilities (0.5)")
    p.add_argument("--format", default="text", choices=["text", "json"])
