"""``python -m evalhydra.services.mock``: run the mock server as its own process.

Prints ``evalhydra mock listening on http://HOST:PORT/v1`` once bound (so a
parent started with ``--port 0`` can read the port), then serves until killed.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Any

import trio

from evalhydra.services.mock.server import MockServer
from evalhydra.services.mock.settings import FAULTS, MockSettings

__all__ = ["build_parser", "main"]

#: What the mock answers (docs/mock.md has the same sentences, each with an example).
REPLIES = """what it answers, from the last user message (it is no model):
  (nothing below)                        the message itself (an echo)
  Reply with exactly X.                  X
  Reply X with probability P.            X with probability P, else "not X" (seeded)
  JSON ... with an F field set to V.     {"F": "V"} (any JSON request: an object)
  Call NAME with {JSON}.                 a call of NAME (tools offered); one a turn, all "in parallel";
                                         then "Then reply with exactly X."'s X, or the last result
  a model_grade or rubric prompt         a JSON verdict (as mock_judge)"""

#: (flag, settings field, type, help) for every switch.
_SWITCHES: list[tuple[str, str, Any, str]] = [
    ("--latency-ms", "latency_ms", float, "delay of every chat answer, in ms (default 0)"),
    ("--jitter-ms", "jitter_ms", float, "uniform +/- spread around --latency-ms (default 0)"),
    ("--fail-rate", "fail_rate", float, "share of chat requests answered --fail-status"),
    ("--fail-status", "fail_status", int, "status of failures (default 500; 429, 503 ...)"),
    ("--retry-after-s", "retry_after_s", float, "send Retry-After: N with failures"),
    ("--fail-first-n", "fail_first_n", int, "fail the first N chat requests, then succeed"),
    ("--hang-rate", "hang_rate", float, "share never answered (until the client leaves)"),
    ("--malformed-rate", "malformed_rate", float, "share answered 200 with truncated JSON"),
    ("--reset-rate", "reset_rate", float, "share whose socket closes mid-body"),
    ("--oversized-rate", "oversized_rate", float, "share answered with a body > 8 MiB"),
    ("--seed", "seed", int, "seed of the fault and jitter generator (default 0)"),
    ("--model", "model", str, "model named when a request has none (default mock-model)"),
    ("--fixed-reply", "fixed_reply", str, "answer every chat request with this text"),
    ("--reasoning", "reasoning", str, "think first, in this shape: reasoning_content, reasoning or inline"),
    ("--stream-delta-chars", "stream_delta_chars", int, "most characters per streamed delta (default 4)"),
    ("--stream-delay-ms", "stream_delay_ms", float, "pause between streamed events, in ms (default 0)"),
    ("--rate-limit-rps", "rate_limit_rps", float, "refuse (429) past a budget refilling at X requests/s"),
    ("--rate-limit-burst", "rate_limit_burst", int, "the budget's size (default 20)"),
    ("--rate-limit-retry-after-s", "rate_limit_retry_after_s", float, "Retry-After of a refusal (default 1)"),
    ("--rate-limit-later-rps", "rate_limit_later_rps", float,
     "the budget's rate after --rate-limit-later-after-s"),
    ("--rate-limit-later-after-s", "rate_limit_later_after_s", float, "when the later rate starts (s)"),
    ("--rate-limit-dialect", "rate_limit_dialect", str,
     "the budget's headers: openai (default), bucket, anthropic, azure or bare"),
    ("--stream-split-bytes", "stream_split_bytes", int,
     "send streams in pieces of N bytes (default: one per event)"),
    ("--batch-delay-s", "batch_delay_s", float, "process a batch (/v1/batches) X s after its creation"),
    ("--batch-fail-every", "batch_fail_every", int, "every N-th line of a batch goes to its error file"),
    ("--batch-outcome", "batch_outcome", str, "end every batch this way: expired, failed or stuck"),
    ("--tool-wire", "tool_wire", str, "send tool calls as some real server does (comma-separated): no_ids,"
     " same_ids, empty_arguments, content_and_calls, stop_finish, no_index, reused_index, names_repeated,"
     " last_bare, split_surrogate; or with a serving fault: marker_in_content, stream_differs, utf8_split,"
     " parallel_ignored, required_ignored, turn_ids, responses_unpaired"),
    ("--tool-wire-rate", "tool_wire_rate", float, "shape this share of replies as --tool-wire says (1)"),
    ("--judge-sensitivity", "judge_sensitivity", float,
     "as a model_grade judge, pass a right output with this chance (default 1)"),
    ("--judge-specificity", "judge_specificity", float,
     "as a model_grade judge, fail a wrong output with this chance (default 1)"),
]


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser; every flag mirrors a ``MockSettings`` field."""
    parser = argparse.ArgumentParser(
        prog="python -m evalhydra.services.mock",
        description="OpenAI-compatible mock chat-completions server (deterministic replies, "
        "switchable faults). Rates are probabilities in [0, 1] drawn from one seeded "
        "generator; settings can also be changed at run time with POST /_mock/config.",
        epilog=REPLIES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=9000, metavar="N", help="port (default 9000); 0 picks a free one"
    )
    for flag, dest, kind, text in _SWITCHES:
        metavar = {int: "N", float: "X", str: "TEXT"}[kind]
        parser.add_argument(flag, dest=dest, type=kind, default=None, metavar=metavar, help=text)
    parser.add_argument(
        "--retry-after-http-date",
        dest="retry_after_http_date",
        action="store_true",
        default=None,
        help="send Retry-After as an HTTP-date instead of seconds",
    )
    parser.add_argument(
        "--fault",
        choices=FAULTS,
        default=None,
        metavar="KIND",
        help="force this fault on every chat request: " + ", ".join(FAULTS),
    )
    return parser


def settings_from_args(args: argparse.Namespace) -> MockSettings:
    """Build settings from parsed flags (unset flags keep the defaults)."""
    names = [dest for _, dest, _, _ in _SWITCHES] + ["retry_after_http_date", "fault"]
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    return MockSettings(**given)


async def _run(server: MockServer, port: int) -> int:
    """Serve until SIGINT or SIGTERM, then stop cleanly; 1 when the port is taken."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        try:
            listeners = await trio.open_tcp_listeners(port, host=server.host)
        except OSError as exc:
            print(f"evalhydra mock: cannot listen on {server.host}:{port}: {exc}", file=sys.stderr)
            return 1
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve_listeners, listeners)
            print(f"evalhydra mock listening on {server.url}", flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status.

    Args:
        argv: Arguments without the program name (default ``sys.argv[1:]``).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    return trio.run(_run, MockServer(settings, args.host), args.port)


if __name__ == "__main__":
    sys.exit(main())
