"""The simulator audit in the viewer: one conversation at a time, read as a dialogue, marked by
keyboard "the simulated user played its part" or "it broke the task" with a kind.

The queue is :func:`evalhydra.analysis.simulator_audit.audit_queue`'s (failures first, a quarter
on passes); ``after`` walks past skipped ones. An audit is written through a writable connection
opened for that one request, in its own transaction: the viewer writes nothing else.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from evalhydra.analysis.simulator_audit import AuditItem, next_to_audit
from evalhydra.store.audits import AUDIT_KINDS, TRANSCRIPT_SQL, save_audit, transcript_sha256
from evalhydra.store.db import immediate, open_store
from evalhydra.viewer.render import render_dialogue

__all__ = ["AUDIT_KEYS", "audit_page", "store_audit"]

#: The key that marks each kind (``o``: the simulated user played its part).
AUDIT_KEYS = {kind: str(i) for i, kind in enumerate(AUDIT_KINDS, start=1)}


def audit_page(conn: sqlite3.Connection, run_ids: list[str], after: int) -> dict[str, Any]:
    """What the audit page shows: the next conversation to audit past ``after`` (None: none is
    left), as a dialogue with the simulated user's instructions, and how far the audit got."""
    item, audited, total = next_to_audit(conn, run_ids, after)
    values: dict[str, Any] = {"item": item, "audited": audited, "total": total, "kinds": AUDIT_KEYS,
                              "skipped": after >= 0 and audited < total}
    if item is not None:
        values.update(_conversation(conn, item))
    return values


def _conversation(conn: sqlite3.Connection, item: AuditItem) -> dict[str, Any]:
    sql = (f"select {TRANSCRIPT_SQL}, json_extract(details, '$.trajectory.stop_reason'),"
           " json_extract(details, '$.trajectory.user'), service_name, model from results"
           f" where eval_id = ? and case_id = ? and {TRANSCRIPT_SQL} is not null")
    for transcript, stop, user, service, model in conn.execute(sql, [item.eval_id, item.case_id]):
        if transcript_sha256(transcript) == item.transcript_sha256:
            simulator = json.loads(user or "{}")
            return {"dialogue": render_dialogue(json.loads(transcript)), "stop_reason": stop,
                    "stopped_by": simulator.get("stopped_by"), "instructions": simulator.get("instructions"),
                    "simulator": simulator.get("simulator_digest"), "target": f"{service}/{model}"}
    return {"dialogue": None}


def store_audit(store_path: Path, body: Mapping[str, Any], labeller: str) -> str:
    """Store one audit a page sent (``eval``, ``case``, ``transcript_sha256``, ``broke``, ``kind``,
    ``note``); returns what it says.

    Raises:
        EvalHydraError: A field missing or malformed, or no such conversation stored.
    """
    with closing(open_store(store_path)) as store, immediate(store.conn):
        save_audit(store.conn, body, labeller)
    return f"broke: {body['kind']}" if body.get("broke") else "played its part"
