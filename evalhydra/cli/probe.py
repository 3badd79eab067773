"""``evalhydra probe tools [OPTIONS] [HYDRA_OVERRIDES...]``: a tool-calling conformance probe of a
run's service (:mod:`evalhydra.probe`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from evalhydra.cli.commands import CommandParser
from evalhydra.compose.hydra_errors import compose_explained
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.outfiles import write_output
from evalhydra.job.exit_codes import ExitCode
from evalhydra.job.probe import probe_exit_code, probe_plan, store_probe
from evalhydra.plan.build import build_plan
from evalhydra.probe.output import as_json, as_junit, as_text

__all__ = ["main"]

DESCRIPTION = ("Send a fixed set of deterministic tool-calling probes to a run's service and report, per "
               "check, pass, fail or n/a with the raw evidence: single, parallel and forced calls, "
               "tool_choice, parallel_tool_calls, schemas, call ids, tool results sent back, and how a "
               "stream sends calls. Exit 0 when every check passed (or did not apply), 1 when one failed, "
               "3 when the endpoint could not be probed. The checks go to the store's probes table.")
EPILOG = ("Example: evalhydra probe tools service=vllm service.model=qwen3\n"
          "         evalhydra probe tools --api responses --format junit --out probe.xml service=openai")


def build_parser() -> argparse.ArgumentParser:
    """The ``evalhydra probe`` argument parser."""
    parser = CommandParser(prog="evalhydra probe", description=DESCRIPTION, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["tools"], help="what to probe (tools: tool calling)")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                        help="Hydra overrides naming the service (service=NAME service.model=…)")
    parser.add_argument("--api", choices=["chat", "responses"], default="chat",
                        help="chat completions (default) or the Responses API (/v1/responses)")
    parser.add_argument("--format", choices=["text", "json", "junit"], default="text", help="output format")
    parser.add_argument("--out", metavar="FILE", help="write the report there instead of stdout")
    parser.add_argument("--quick", action="store_true",
                        help="only the quick subset (single and parallel calls, whole and streamed)")
    parser.add_argument("--no-store", action="store_true", help="do not keep the checks in the store")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run ``evalhydra probe``; return its exit code."""
    args = build_parser().parse_intermixed_args(list(argv))
    try:
        plan = build_plan(compose_explained(args.overrides), args.overrides)
        report = probe_plan(plan, api=args.api, quick=args.quick)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if report.unreachable:
        print(f"error: {report.endpoint}: {report.unreachable}", file=sys.stderr)
    elif not args.no_store:
        store_probe(str(plan.store_path), report)
    text = {"text": as_text, "junit": as_junit}.get(args.format, lambda r: json.dumps(
        as_json(r), ensure_ascii=False, indent=2, default=str))(report)
    if args.out:
        try:
            write_output(Path(args.out), text + "\n")
        except EvalHydraError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return ExitCode.USAGE
    else:
        print(text)
    return probe_exit_code(report)

