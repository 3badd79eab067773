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
from evalhydra.config.schema import ServiceConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.text import visible
from evalhydra.job.exit_codes import ExitCode
from evalhydra.plan.services import known_service_sources
from evalhydra.registry.definitions import load_registry
from evalhydra.services.batch.api import BatchApi, BatchApiError, api_base
from evalhydra.store.batches import BatchLedger, list_batches

__all__ = ["cmd_batches", "configure_batches"]

#: Statuses a provider can still cancel.
_CANCELLABLE = frozenset({"validating", "in_progress", "finalizing"})


def cmd_batches(args: argparse.Namespace) -> int:
    """List the store's batch jobs, or cancel the pending ones.

    list: every batch with its service, status, lines and the provider's counts.
    cancel: ask the provider to cancel the pending batches (all of them, or those named);
    a rerun then stores their unanswered cells as batch_cancelled errors, and the
    rerun after that sends them again. A key is sent only where a configured service
    (service/*.yaml of the packaged config, --config-dir, or --registry's services.json)
    sends it: the same variable to the same API root as the store's batch names.

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
    services = _configured(args.config_dir, args.registry)
    return _cancel(Path(args.store).expanduser(), batches, set(args.batch_ids), services)


def _configured(config_dirs: list[str], registry: str | None) -> list[ServiceConfig]:
    """Every configured OpenAI-compatible service (a file that does not read is skipped)."""
    found = known_service_sources(load_registry(Path(registry).expanduser()) if registry else None,
                                  [Path(d).expanduser() for d in config_dirs])
    services = []
    for read in found.values():
        try:
            service = read()
        except Exception:  # noqa: BLE001, S112 (a broken file trusts nothing; the run reports it)
            continue
        if service.kind == "openai" and service.base_url:
            services.append(service)
    return services


def _trusted_key(batch: dict[str, Any], services: list[ServiceConfig]) -> tuple[bool, str]:
    """Whether the batch may be cancelled, and the key to send: a store names a URL and a variable,
    but a key goes only where a configured service sends that variable."""
    variable = batch["api_key_env"]
    if not variable:
        return True, ""
    for service in services:
        if service.api_key_env == variable and api_base(service.base_url).rstrip("/") == \
                str(batch["endpoint"]).rstrip("/"):
            return True, os.environ.get(variable, "").strip()
    return False, ""


def _row(batch: dict[str, Any]) -> dict[str, Any]:
    counts = batch["request_counts"] or "{}"
    return {"batch": batch["batch_id"] or "(not created)", "service": batch["service"],
            "status": batch["status"], "lines": batch["lines"], "counts": counts, "run": batch["run_id"],
            "submitted": _when(batch["submitted_at"]), "endpoint": batch["endpoint"]}


def _when(stamp: float | None) -> str:
    return "—" if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def _cancel(path: Path, batches: list[dict[str, Any]], named: set[str],
            services: list[ServiceConfig]) -> int:
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
        failed = trio.run(_cancel_all, ledger, chosen, services)
    finally:
        ledger.close()
    return ExitCode.UNMEASURED if failed else ExitCode.OK


async def _cancel_all(ledger: BatchLedger, batches: list[dict[str, Any]],
                      services: list[ServiceConfig]) -> int:
    failed = 0
    for batch in batches:
        name = _one_line(str(batch["batch_id"]))
        if batch["endpoint"] == "evalhydra-mock":
            print(f"{name}: the built-in mock's batches end with its run; nothing to cancel")
            continue
        trusted, key = _trusted_key(batch, services)
        if not trusted:
            failed += 1
            print(f"{name}: not cancelled: no configured service sends {_one_line(batch['api_key_env'])} to "
                  f"{_one_line(str(batch['endpoint']))}; the key goes nowhere a store alone names. "
                  "Pass --config-dir or --registry where that service is defined.")
            continue
        api = BatchApi(batch["endpoint"], {"authorization": f"Bearer {key}"} if key else {})
        try:
            found = await api.cancel(batch["batch_id"])
        except BatchApiError as exc:
            failed += 1
            message = exc.message.replace(key, "***") if key else exc.message
            print(f"{name}: not cancelled: {_one_line(message)}")
            continue
        finally:
            await api.aclose()
        await trio.to_thread.run_sync(partial(ledger.update, batch["batch_key"], status=found["status"]))
        print(f"{name}: {_one_line(found['status'])}")
    return failed


def _one_line(text: object) -> str:
    """Text from a store or a provider on one line, control characters spelled out."""
    return visible(str(text), lines=False)


def configure_batches(p: argparse.ArgumentParser) -> None:
    """The options of ``evalhydra batches``."""
    p.add_argument("action", nargs="?", choices=["list", "cancel"], default="list",
                   help="what to do (default list)")
    p.add_argument("batch_ids", nargs="*", metavar="BATCH_ID", help="cancel: only these batches")
    p.add_argument("--config-dir", action="append", default=[], metavar="DIR",
                   help="cancel: a config directory whose service/*.yaml may send a key (repeatable)")
    p.add_argument("--registry", metavar="DIR", help="cancel: a registry whose services.json may send a key")
    add_format(p)
