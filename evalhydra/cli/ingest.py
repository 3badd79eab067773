"""``evalhydra ingest otlp``: an agent's OpenTelemetry traces as a dataset of recorded answers."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode
from evalhydra.telemetry.ingest import CASE_KEY, read_spans, write_recorded
from evalhydra.telemetry.receiver import TraceReceiver

__all__ = ["cmd_ingest", "configure_ingest"]


def cmd_ingest(args: argparse.Namespace) -> int:
    """Turn each trace of an agent instrumented with OpenTelemetry's GenAI conventions into the
    recorded answer of the case it names (a span attribute, evalhydra.case_id unless --case-key):
    its final answer, its tool calls with their arguments, its model and usage. The cases'
    dataset is written to --out with each case's sample; an eval reading that file with
    service=recorded scores the traces with every answer and tool-call matcher, calling no model.
    Traces are OTLP JSON lines (an ExportTraceServiceRequest a line) or OTLP protobuf (.pb).
    With --listen HOST:PORT, an OTLP/HTTP receiver on loopback takes them instead (the endpoint
    and the token its exporter must send are printed); Ctrl-C ends it and writes --out.
    Traces that name no case, and cases no trace names, are listed.

    Examples:
      evalhydra ingest otlp traces.jsonl --cases data/test.jsonl --out data/recorded.jsonl
      evalhydra ingest otlp --listen 127.0.0.1:4318 --cases data/test.jsonl --out data/recorded.jsonl
    """
    if args.listen:
        spans = _received(args.listen)
    elif args.traces:
        spans = list(read_spans([Path(p) for p in args.traces]))
    else:
        raise EvalHydraError("ingest otlp needs trace files, or --listen HOST:PORT.",
                             "See: evalhydra ingest --help")
    found, missing = write_recorded(spans, Path(args.cases), Path(args.out), args.case_key)
    if not found.samples:
        raise EvalHydraError(f"no trace names a case of {args.cases} by the span attribute {args.case_key}.",
                             "Set the attribute on the agent's spans, or name another with --case-key.")
    print(f"{len(found.samples)} case(s) recorded from their traces in {args.out}")
    if missing:
        print(f"{missing} case(s) of {args.cases} had no trace: service=recorded reports them as errors")
    if found.unmatched:
        shown = ", ".join(found.unmatched[:5]) + (" …" if len(found.unmatched) > 5 else "")
        print(f"{len(found.unmatched)} trace(s) named no case ({args.case_key}): {shown}")
    if found.duplicates:
        print(f"{len(found.duplicates)} case(s) named by more than one trace (the first kept):"
              f" {', '.join(found.duplicates[:5])}")
    return ExitCode.OK


def _received(listen: str) -> list[dict[str, Any]]:
    """Run a receiver on ``listen`` until Ctrl-C (or SIGTERM); the spans it took."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit():
        raise EvalHydraError(f"--listen {listen}: give HOST:PORT, e.g. 127.0.0.1:4318.")
    receiver = TraceReceiver(host.strip("[]"), int(port))
    print(f"evalhydra ingest: listening on {receiver.endpoint}", flush=True)
    print(f"  exporter header: authorization=Bearer {receiver.token}"
          f"  (OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20{receiver.token})", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        receiver.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        receiver.close()
    if receiver.refused:
        print(f"{receiver.refused} request(s) refused: no token", flush=True)
    return receiver.spans


def configure_ingest(p: argparse.ArgumentParser) -> None:
    """``evalhydra ingest otlp TRACES… --cases FILE --out FILE [--case-key ATTRIBUTE]``."""
    p.add_argument("kind", choices=["otlp"], help="the traces' format: OTLP (JSON lines or .pb)")
    p.add_argument("traces", nargs="*", metavar="TRACES", help="OTLP JSON lines files or .pb files")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="take traces over OTLP/HTTP on loopback until Ctrl-C, instead of files")
    p.add_argument("--cases", required=True, metavar="FILE",
                   help="the eval's dataset (JSONL, each case an id)")
    p.add_argument("--out", required=True, metavar="FILE", help="where the dataset with samples goes")
    p.add_argument("--case-key", default=CASE_KEY, metavar="ATTRIBUTE",
                   help=f"the span attribute naming a trace's case (default: {CASE_KEY})")
