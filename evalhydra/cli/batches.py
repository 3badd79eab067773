"""``evalhydra batches``: the store's batch jobs (``service.batch.enabled=true``), and cancelling them."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import trio

from evalhydra.cli.store_access import add_format, format_rows, open_read_only
from evalhydra.core.errors import EvalHydraError
from evalhydra.job.exit_codes import ExitCode
from evalhydra.services.batch.api import BatchApi, BatchApiError
from evalhydra.store.batches import BatchLedger, list_batches

__all__ = ["cmd_batches", "configure_batches"]

#: Statuses a provider can still cancel.
_CANCELLABLE = frozenset({"validating", "in_progress", "finalizing"})


def cmd_batches(args: argparse.Namespace) -> int:
    """List the store's batch jobs, or cancel the pending ones.

    list: every batch with its service, status, lines and the provider's counts.
    cancel: ask the provider to cancel the pending batches (all of them, or those named);
    a rerun then stores their unanswered cells as batch_cancelled errors, and the
    rerun after that sends them again. The key is read from each batch's api_key_env.

    Examples:
      evalhydra batches
      evalhydra batches cancel
      evalhydra batches cancel batch_abc123 --store outputs/evalhydra.db
    """
    store = open_read_only(args)
    try:
        batches = list_batches(store.conn)
    finally:
        store.close()
    if args.action == "list":
        rows = [_row(b) for b in batches]
        print(format_rows(rows, args.format) if rows else f"{args.store}: no batch jobs")
        return ExitCode.OK
    return _cancel(Path(args.store).expanduser(), batches, set(args.batch_ids))


def _row(batch: dict[str, Any]) -> dict[str, Any]:
    counts = batch["request_counts"] or "{}"
    return {"batch": batch["batch_id"] or "(not created)", "service": batch["service"],
            "status": batch["status"], "lines": batch["lines"], "counts": counts, "run": batch["run_id"],
            "submitted": _when(batch["submitted_at"]), "endpoint": batch["endpoint"]}


def _when(stamp: float | None) -> str:
    return "—" if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def _cancel(path: Path, batches: list[dict[str, Any]], named: set[str]) -> int:
    known = {b["batch_id"] for b in batches}
    unknown = sorted(named - known)
    if unknown:
        raise EvalHydraError(f"{path}: no batch {unknown[0]} in this store.",
                             "evalhydra batches lists them.")
    chosen = [b for b in batches if b["status"] in _CANCELLABLE and (not named or b["batch_id"] in named)]
    if not chosen:
        print("no pending batch to cancel")
        return ExitCode.OK
    ledger = BatchLedger(path)
    try:
        failed = trio.run(_cancel_all, ledger, chosen)
    finally:
        ledger.close()
    return ExitCode.UNMEASURED if failed else ExitCode.OK


async def _cancel_all(ledger: BatchLedger, batches: list[dict[str, Any]]) -> int:
    failed = 0
    for batch in batches:
        if batch["endpoint"] == "evalhydra-mock":
            print(f"{batch['batch_id']}: the built-in mock's batches end with its run; nothing to cancel")
            continue
        key = os.environ.get(batch["api_key_env"] or "", "") if batch["api_key_env"] else ""
        api = BatchApi(batch["endpoint"], {"authorization": f"Bearer {key}"} if key else {})
        try:
            found = await api.cancel(batch["batch_id"])
        except BatchApiError as exc:
            failed += 1
            message = exc.message.replace(key, "***") if key else exc.message
            print(f"{batch['batch_id']}: not cancelled: {message}")
            continue
        finally:
            await api.aclose()
        await trio.to_thread.run_sync(partial(ledger.update, batch["batch_key"], status=str(found["status"])))
        print(f"{batch['batch_id']}: {found['status']}")
    return failed


def configure_batches(p: argparse.ArgumentParser) -> None:
    """The options of ``evalhydra batches``."""
    p.add_argument("action", nargs="?", choices=["list", "cancel"], default="list",
                   help="what to do (default list)")
    p.add_argument("batch_ids", nargs="*", metavar="BATCH_ID", help="cancel: only these batches")
    add_format(p)
