"""``evalhydra cache``: what the response cache holds, and emptying it."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from tabulate import tabulate

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.text import visible
from evalhydra.job.exit_codes import ExitCode
from evalhydra.services.cache import cache_stats, default_cache_path, parse_expiry, prune

__all__ = ["cmd_cache", "configure_cache"]


def cmd_cache(args: argparse.Namespace) -> int:
    """Show, prune or clear the response cache (``cache.enabled=true`` runs fill it).

    stats: entries, size, the oldest and newest, entries per endpoint and model.
    prune: delete the entries older than --expiry (default 7d, as runs count them).
    clear: delete every entry.

    Examples:
      evalhydra cache stats
      evalhydra cache prune --expiry 1d
      evalhydra cache clear --path /tmp/evalhydra-cache.db
    """
    path = Path(args.path).expanduser() if args.path else default_cache_path()
    if not path.is_file():
        if args.action == "stats":
            print(f"{path}: no response cache yet (runs with cache.enabled=true make it)")
            return ExitCode.OK
        raise EvalHydraError(f"{path}: there is no response cache here.",
                             "Give its file with --path (the runs' cache.path).")
    if args.action == "stats":
        print(_render(cache_stats(path), args.format))
    else:
        deleted = prune(path, parse_expiry(args.expiry) if args.action == "prune" else None)
        print(f"{path}: {deleted} entr{'y' if deleted == 1 else 'ies'} deleted")
    return ExitCode.OK


def _when(stamp: float | None) -> str:
    return "—" if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def _render(stats: dict[str, object], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(stats, indent=2)  # control characters are escaped as \\uXXXX
    rows = stats["by_model"]
    head = (f"{stats['path']}: {stats['entries']} entries, {int(stats['bytes']) / 1e6:.1f} MB"  # type: ignore[call-overload]
            f" (oldest {_when(stats['oldest'])}, newest {_when(stats['newest'])})")  # type: ignore[arg-type]
    table = "\n" + tabulate(rows, headers="keys") if rows else ""  # type: ignore[arg-type]
    return visible(head + table)  # endpoints and models are the cache file's: shown, never acted on


def configure_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["stats", "prune", "clear"], help="what to do")
    p.add_argument("--path", help="the cache file (default: $XDG_CACHE_HOME/evalhydra/responses.db)")
    p.add_argument("--expiry", default="7d", help="prune: entries older than this go (default 7d)")
    p.add_argument("--format", choices=["text", "json"], default="text", help="stats output (default text)")
