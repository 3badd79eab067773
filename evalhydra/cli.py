"""Subcommands over the store: ``runs``, ``report``, ``compare``, ``query``, ``results``,
``rejudge``, ``merge``, ``list``.

They are plain argparse commands (Hydra owns the run itself). Each takes
``--store PATH`` (default: the configured ``store.path``) and exits 0 on
success, 1 when a gate fails, 2 on a usage or user error.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate, tabulate_formats

from evalhydra.errors import EvalHydraError
from evalhydra.store import Store, open_store

__all__ = ["main"]

DEFAULT_STORE = "outputs/evalhydra.db"


def _add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", default=DEFAULT_STORE, metavar="PATH", help=f"SQLite store (default: {DEFAULT_STORE})"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalhydra", description="Inspect and report on the evalhydra store."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (fn, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=(fn.__doc__ or help_text).strip())
        _add_store(command)
        CONFIGURE[name](command)
        command.set_defaults(handler=fn)
    return parser


def main(argv: Sequence[str]) -> int:
    """Run one subcommand; return the exit code."""
    args = _parser().parse_args(list(argv))
    try:
        return int(args.handler(args) or 0)
    except EvalHydraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _open(args: argparse.Namespace, *, read_only: bool = True) -> Store:
    return open_store(Path(args.store), read_only=read_only)


def _resolve_run_ids(store: Store, ids: Sequence[str]) -> list[str]:
    """Expand ``latest`` and unique prefixes to full run ids."""
    known = [r["run_id"] for r in store.runs()]
    out = []
    for given in ids:
        if given == "latest":
            if not known:
                raise EvalHydraError("The store has no runs yet.", "Run an eval first.")
            out.append(known[0])
            continue
        matches = [k for k in known if k == given] or [k for k in known if k.startswith(given)]
        if len(matches) != 1:
            from evalhydra.errors import did_you_mean

            what = "is ambiguous" if matches else "not found"
            raise EvalHydraError(f"Run '{given}' {what}.", did_you_mean(given, known[:50]))
        out.append(matches[0])
    return out


# -- runs ---------------------------------------------------------------------
def cmd_runs(args: argparse.Namespace) -> int:
    """List past runs: id, time, evals, services, cells, pass rate, status.

    Example: evalhydra runs --limit 10
    """
    store = _open(args)
    sql = """
        select ru.run_id, ru.started_at, ru.status,
          group_concat(distinct r.eval_id) as evals, group_concat(distinct r.service_name) as services,
          count(r.cell_key) as cells, round(100.0 * avg(r.passed), 1) as pass_pct,
          sum(r.error_kind is not null) as errors
        from runs ru left join run_cells rc on rc.run_id = ru.run_id
        left join results r on r.cell_key = rc.cell_key
        group by ru.run_id order by ru.started_at desc, ru.run_id limit ?"""
    rows = list(store.query(sql, [args.limit]))
    print(_format(rows, args.format) if rows else "No runs yet.")
    return 0


def _cfg_runs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--format", default="simple", help="tabulate format, csv or json")


# -- report -------------------------------------------------------------------
def cmd_report(args: argparse.Namespace) -> int:
    """Regenerate reports of one or more runs (or a sweep) from the store.

    Example: evalhydra report latest --format md --out outputs/report
    """
    from evalhydra.callbacks import sweep_run_ids
    from evalhydra.reports.writer import write_run_reports

    store = _open(args)
    ids = _resolve_run_ids(store, args.run_ids) if args.run_ids else []
    if args.sweep:
        ids += sweep_run_ids(store, Path(args.sweep).resolve())
    if not ids:
        raise EvalHydraError("No runs selected.", "Name RUN_IDs (or 'latest'), or --sweep DIR.")
    formats = args.format.split(",")
    written = write_run_reports(store, ids, Path(args.out), formats=formats, baseline_service=args.baseline)
    for path in written:
        print(path)
    return 0


def _cfg_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="run ids, unique prefixes, or 'latest'")
    p.add_argument("--sweep", metavar="DIR", help="every run of a Hydra multirun sweep directory")
    p.add_argument("--format", default="json,md", help="comma list of json, md, jsonl, text, junit")
    p.add_argument("--out", default="outputs/report", metavar="DIR")
    p.add_argument("--baseline", help="baseline service for comparisons (default: the first)")


# -- query --------------------------------------------------------------------
def cmd_query(args: argparse.Namespace) -> int:
    """Run read-only SQL against the store (the database is opened read-only).

    Example: evalhydra query "select eval_id, avg(passed) from results group by 1"
    """
    import sqlite3

    store = _open(args)
    try:
        rows = list(store.query(args.sql))
    except sqlite3.Error as exc:
        raise EvalHydraError(
            f"SQL error: {exc}.", "The store is opened read-only; only SELECTs work."
        ) from None
    print(_format(rows, args.format))
    return 0


def _cfg_query(p: argparse.ArgumentParser) -> None:
    p.add_argument("sql")
    p.add_argument(
        "--format",
        default="simple",
        help=f"csv, json, or a tabulate format ({', '.join(sorted(tabulate_formats)[:6])}, …)",
    )


# -- results ------------------------------------------------------------------
def cmd_results(args: argparse.Namespace) -> int:
    """List every trial of a run (model, case, trial, status, duration/latency).

    Example: evalhydra results latest
    """
    store = _open(args)
    run_ids = _resolve_run_ids(store, [args.run_id])
    rows = [
        {
            "eval": r["eval_id"],
            "service": r["service_name"],
            "model": r["model"],
            "case": r["case_id"],
            "trial": r["run_index"],
            "status": r["status"],
            "score": r["score"],
            "duration_s": round((r["latency_ms"] or 0) / 1000, 2),
            "reason": (r["failure_reason"] or "")[:60],
        }
        for r in store.run_rows(run_ids)
    ]
    print(_format(rows, args.format) if rows else "No results for that run.")
    return 0


def _cfg_results(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--format", default="simple")


# -- merge --------------------------------------------------------------------
def cmd_merge(args: argparse.Namespace) -> int:
    """Merge shard stores (one per launcher job or machine) into --store, exactly.

    Example: evalhydra merge --store outputs/all.db shards/*.db
    """
    from evalhydra.store import merge_stores

    for shard in args.shards:
        if not Path(shard).exists():
            raise EvalHydraError(f"Shard not found: {shard}.")
    total = merge_stores(Path(args.store), [Path(s) for s in args.shards])
    print(f"merged {len(args.shards)} shard(s); {total} results in {args.store}")
    return 0


def _cfg_merge(p: argparse.ArgumentParser) -> None:
    p.add_argument("shards", nargs="+", metavar="SHARD")


# -- list ---------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    """List the services and evals of a registry (zig_eval ``list``).

    Example: evalhydra list --registry ../shared/fixtures/zig_eval_registry
    """
    from evalhydra.registry import load_registry, resolve_registry_root

    registry = load_registry(resolve_registry_root(args.registry))
    print("services")
    for name, spec in registry.services.items():
        print(f"  {name} model={spec['default_model']}")
    print("evals")
    for eval_id, spec in registry.evals.items():
        print(f"  {eval_id} group={spec['group']} split={spec.get('split') or '-'}")
    return 0


def _cfg_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry", default="registry")


# -- formatting ---------------------------------------------------------------
def _format(rows: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2, ensure_ascii=False, default=str)
    if fmt == "csv":
        buffer = io.StringIO()
        if rows:
            writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return buffer.getvalue().rstrip("\n")
    if fmt not in tabulate_formats:
        raise EvalHydraError(
            f"Unknown --format {fmt}.", "Use csv, json or one of: " + ", ".join(tabulate_formats)
        )
    return tabulate(rows, headers="keys", tablefmt=fmt)


COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {
    "runs": (cmd_runs, "list past runs"),
    "report": (cmd_report, "regenerate reports from the store"),
    "query": (cmd_query, "read-only SQL over the store"),
    "results": (cmd_results, "per-trial listing of a run"),
    "merge": (cmd_merge, "merge shard stores exactly"),
    "list": (cmd_list, "list a registry's services and evals"),
}
CONFIGURE: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "runs": _cfg_runs,
    "report": _cfg_report,
    "query": _cfg_query,
    "results": _cfg_results,
    "merge": _cfg_merge,
    "list": _cfg_list,
}
