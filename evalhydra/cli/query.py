"""``evalhydra query``: read-only SQL over the store, bounded in time, streamed."""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
import sys
from typing import Any

from evalhydra.cli.store_access import add_format, format_rows, open_read_only
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.text import visible
from evalhydra.job.exit_codes import ExitCode
from evalhydra.store.timelimit import interrupted, time_limit

__all__ = ["cmd_query", "configure_query"]


_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                 sqlite3.SQLITE_RECURSIVE}
_TABLE_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
                  "foreign_key_list"}
_VALUE_PRAGMAS = {"table_list", "database_list", "collation_list", "function_list", "pragma_list",
                  "compile_options", "user_version", "schema_version", "page_count", "page_size"}


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    """SQLite authorizer: reads only (SELECT, WITH, read-only PRAGMAs).

    SQLite reports reading the schema for a table-valued pragma such as
    ``pragma_table_info('runs')`` as an update of ``sqlite_master``; that is
    allowed (the connection is read-only anyway).
    """
    if action in _READ_ACTIONS or (action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master"):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 in _TABLE_PRAGMAS or (arg1 in _VALUE_PRAGMAS
                                                                        and arg2 is None)):
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def cmd_query(args: argparse.Namespace) -> int:
    """Run read-only SQL against the store: the database is opened read-only and only
    SELECT (WITH, EXPLAIN, read-only PRAGMAs) may run; anything else fails with exit 2.

    Rows are streamed as SQLite returns them with --format csv, json or jsonl; a table
    format shows at most --max-rows. A query running longer than --timeout seconds
    (default 60) is stopped (exit 2).

    Views: run_eval_stats, run_pass_rates, latest_results, failures, case_flakiness,
    eval_stats, run_summary, run_results.

    Example: evalhydra query "select * from run_pass_rates order by started_at desc" --format github
    """
    store = open_read_only(args)
    store.conn.set_authorizer(_authorize)
    try:
        with time_limit(store.conn, args.timeout):
            _print_query(store.conn, args)
    except sqlite3.Error as exc:
        raise _query_error(exc, args) from None
    return ExitCode.OK


def _print_query(conn: sqlite3.Connection, args: argparse.Namespace) -> None:
    """Run the query and print its rows as ``--format`` asks."""
    cursor = conn.execute(args.sql)
    names = [d[0] for d in cursor.description or ()]
    if not names:
        print("(no result set)")
    elif args.format in ("csv", "json", "jsonl"):
        _stream(cursor, names, args.format)
    else:
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchmany(args.max_rows + 1)]
        print(format_rows(rows[: args.max_rows], args.format))
        if len(rows) > args.max_rows:
            print(f"… stopped at {args.max_rows:,} rows: use --format csv, json or jsonl for all",
                  file=sys.stderr)


def _query_error(exc: sqlite3.Error, args: argparse.Namespace) -> EvalHydraError:
    what = f"SQL error: {str(exc).rstrip('.')}"
    if interrupted(exc):
        return EvalHydraError(f"The query ran longer than {args.timeout:g} s and was stopped.",
                              "Narrow it (WHERE, LIMIT), or allow longer with --timeout SECONDS.")
    if any(word in what for word in ("not authorized", "readonly", "may not be modified")):
        what = f"Query refused: '{_head(args.sql)}' would change the store or the connection"
    return EvalHydraError(f"{what}.", "evalhydra query is read-only: one SELECT (or WITH, "
                          "EXPLAIN, a read-only PRAGMA) per call.")


def _stream(cursor: sqlite3.Cursor, names: list[str], fmt: str) -> None:
    """Print rows as they come: CSV, a JSON array, or one JSON object per line."""
    out = sys.stdout
    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    if writer is not None:
        writer.writerow(names)
    first = True
    if fmt == "json":
        out.write("[")
    while batch := cursor.fetchmany(1000):
        for row in batch:
            if writer is not None:
                writer.writerow([visible(v) if isinstance(v, str) else v for v in row])
                continue
            text = json.dumps(dict(zip(names, row, strict=True)), ensure_ascii=False, default=str)
            if fmt == "jsonl":
                out.write(text + "\n")
            else:
                out.write(("\n  " if first else ",\n  ") + text)
            first = False
    if fmt == "json":
        out.write("\n]\n" if not first else "]\n")


def _head(sql: str) -> str:
    """The start of a statement, for an error line."""
    text = " ".join(sql.split())
    return text if len(text) <= 40 else text[:39] + "…"


def configure_query(p: argparse.ArgumentParser) -> None:
    p.add_argument("sql", help="one SELECT statement")
    add_format(p)
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="stop a query running longer than this (default 60)")
    p.add_argument("--max-rows", type=int, default=10_000, metavar="N",
                   help="most rows a table format shows (default 10,000; csv, json and jsonl stream all)")
