"""``evalhydra label`` (import people's verdicts) and ``evalhydra calibrate`` (judges against them)."""

from __future__ import annotations

import argparse
import csv
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from evalhydra.analysis.calibration import calibration
from evalhydra.analysis.simulator_audit import simulator_corrections
from evalhydra.cli.store_access import open_read_only
from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode
from evalhydra.reports.calibration import render_calibration, render_simulator_audit
from evalhydra.store.db import immediate, open_store
from evalhydra.store.labels import import_labels

__all__ = ["cmd_calibrate", "cmd_label", "configure_calibrate", "configure_label"]


def cmd_label(args: argparse.Namespace) -> int:
    """Import people's PASS/FAIL verdicts on stored outputs, from JSONL or CSV.

    Each row: eval, case, label (PASS or FAIL); the output judged as output (its text),
    output_sha256, or run and trial (the result that run stored); labeller and note if you
    like. A label holds for every stored result with that output, so it survives reruns and
    rejudges; a labeller's new label of an output replaces their old one.

    Rows whose output matches no stored result (an unknown eval or case, an output never
    stored) are refused, naming the first few, and nothing is stored; --allow-unmatched stores
    them (labels gathered before a run). Rows that label one output twice are merged, the
    later kept.

    Example: evalhydra label labels.jsonl --labeller ana
    """
    path = Path(args.file)
    if not path.is_file():
        raise EvalHydraError(f"{path}: no such file.", "Give a .jsonl or .csv file of labels.")
    store = open_store(Path(args.store).expanduser())
    try:
        with immediate(store.conn):
            account = import_labels(store.conn, _rows(path), args.labeller or "",
                                    allow_unmatched=args.allow_unmatched)
    except UnicodeDecodeError as exc:
        raise EvalHydraError(f"{path}: byte {exc.start} is not UTF-8 text ({exc.reason}); nothing stored.",
                             "Save the labels as UTF-8 JSONL or CSV.") from None
    except csv.Error as exc:
        raise EvalHydraError(f"{path}: not a CSV file this reads: {exc}; nothing stored.",
                             "Save it as CSV with a header row eval,case,label (or as JSONL).") from None
    finally:
        store.close()
    print(f"{account.read} row(s) read, {account.stored} label(s) stored in {args.store},"
          f" {account.merged} duplicate(s) merged, {len(account.unmatched)} matching no stored output"
          + (" (stored: --allow-unmatched)" if account.unmatched else ""))
    return ExitCode.OK


def _rows(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            for number, row in enumerate(csv.DictReader(handle), start=2):
                yield f"{path}:{number}", row
        return
    for number, row in strictjson.json_lines(path):
        if not isinstance(row, dict):
            raise EvalHydraError(f"{path}:{number}: each line is an object {{eval, case, label, …}}.")
        yield f"{path}:{number}", row


def configure_label(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE",
                   help="labels: .jsonl or .csv (eval, case, label, and output or run and trial)")
    p.add_argument("--labeller", default="", help="who labelled (rows may name their own)")
    p.add_argument("--allow-unmatched", action="store_true",
                   help="also store rows whose output matches no stored result (labels gathered before"
                        " a run); by default they are refused and nothing is stored")


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Each judge of the runs against people's labels: sensitivity, specificity, agreement, Cohen's
    kappa and Krippendorff's alpha, with intervals; and each target's judged pass rate corrected
    for the judge's errors (Rogan-Gladen, with an interval carrying the labels' uncertainty).
    A judge is an eval's judge service and model; it is measured on every labelled output it
    judged anywhere in the store (its newest verdict of each), and on how often it repeats a
    verdict when the runs were rejudged. Label in the viewer (evalhydra view RUN, then l and
    p/f/s) or with evalhydra label.

    Simulated users are calibrated as judges are: each target's pass rate among the
    conversations its simulated user did not break, from people's audits (the viewer's
    /runs/RUN/audit), with an interval carrying the audit's uncertainty. The text shows both;
    --simulators shows (and --format json gives) the simulators' alone.

    Example: evalhydra calibrate latest --format json
    """
    store = open_read_only(args)
    ids = store.resolve_run_ids(args.run_ids or ["latest"])
    simulators = simulator_corrections(store.conn, ids)
    if args.simulators:
        print(render_simulator_audit(simulators, args.format))
        return ExitCode.OK
    docs = calibration(store.conn, ids)
    if args.format == "text" and simulators and not docs:
        print(render_simulator_audit(simulators))
    elif args.format == "text" and simulators:
        print(render_calibration(docs) + "\n\n" + render_simulator_audit(simulators))
    else:
        print(render_calibration(docs, args.format))
    return ExitCode.OK


def configure_calibrate(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_ids", nargs="*", metavar="RUN", help="runs (ids, prefixes, latest; default latest)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--simulators", action="store_true",
                   help="the simulated users' audit alone (as JSON with --format json)")

