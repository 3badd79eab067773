"""What the store subcommands share: the ``--store`` option, opening it read-only (migrating
an older store first), the ``--format`` option and its rendering, and reading a target."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from tabulate import tabulate, tabulate_formats

from evalhydra.analysis.comparison import Target, parse_target
from evalhydra.config.defaults import DEFAULT_STORE_PATH
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.text import visible
from evalhydra.store.connection import read_only_uri
from evalhydra.store.db import Store, open_store
from evalhydra.store.schema import SCHEMA_VERSION

__all__ = ["add_format", "add_store", "format_rows", "fraction", "open_read_only", "target_of"]


def add_store(parser: argparse.ArgumentParser) -> None:
    """Add ``--store PATH``."""
    parser.add_argument(
        "--store", default=DEFAULT_STORE_PATH, metavar="PATH",
        help=f"SQLite store (default: {DEFAULT_STORE_PATH})"
    )


def open_read_only(args: argparse.Namespace) -> Store:
    """Open the store read-only, first migrating an older (writable) store in place."""
    path = Path(args.store).expanduser()
    if _behind(path) and os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
        open_store(path).close()
    return open_store(path, read_only=True)


def _behind(path: Path) -> bool:
    if not path.exists():
        return False
    conn = sqlite3.connect(read_only_uri(path), uri=True)
    try:
        return int(conn.execute("pragma user_version").fetchone()[0]) < SCHEMA_VERSION
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def target_of(store: Store, text: str) -> Target:
    """The target ``RUN[@SERVICE[:MODEL]]`` with its run ids resolved in ``store``."""
    run, service, model = parse_target(text)
    return Target(text, tuple(store.resolve_run_ids([run])) if run else (), service, model)


def fraction(text: str) -> float:
    """An argparse type: a fraction in (0, 1)."""
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give a fraction in (0, 1), e.g. 0.05 for 5 points")
    return value


def add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default="simple",
                   help=f"csv, json, jsonl, or a tabulate format"
                        f" ({', '.join(sorted(tabulate_formats)[:6])}, …; default: simple)")


def format_rows(rows: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2, ensure_ascii=False, default=str)
    if fmt == "jsonl":
        return "\n".join(json.dumps(row, ensure_ascii=False, default=str) for row in rows)
    if fmt == "csv":
        buffer = io.StringIO()
        if rows:
            writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return visible(buffer.getvalue().rstrip("\n"))
    if fmt not in tabulate_formats:
        raise EvalHydraError(
            f"Unknown --format {fmt}.", "Use csv, json, jsonl or one of: " + ", ".join(tabulate_formats)
        )
    return visible(tabulate(rows, headers="keys", tablefmt=fmt))
