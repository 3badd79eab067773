"""``probes``: what ``evalhydra probe tools`` found, a row per check of each probe, with its
evidence; the ``probe_latest`` view holds each endpoint's latest probe."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from evalhydra.store.rows import now_iso

__all__ = ["save_probe"]

#: Most characters of a check's evidence kept (a raw chunk or field; a stream is cut).
EVIDENCE_CAP = 4000


def save_probe(conn: sqlite3.Connection, probe_id: str, target: Mapping[str, str],
               verdicts: Iterable[tuple[str, str, str, Any]]) -> None:
    """Store one probe's checks; the caller holds the transaction.

    Args:
        conn: A writing connection.
        probe_id: The probe's id.
        target: ``service``, ``model``, ``endpoint`` and ``api``.
        verdicts: Each check's (id, status, detail, evidence).
    """
    probed_at = now_iso()
    conn.executemany(
        "insert or replace into probes (probe_id, probed_at, service, model, endpoint, api, check_id, status,"
        " detail, evidence) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(probe_id, probed_at, target["service"], target["model"], target["endpoint"], target["api"], check,
          status, detail, _evidence(evidence)) for check, status, detail, evidence in verdicts])


def _evidence(evidence: Any) -> str | None:
    if evidence is None:
        return None
    text = json.dumps(evidence, ensure_ascii=False, default=str)
    return text if len(text) <= EVIDENCE_CAP else text[:EVIDENCE_CAP] + "…"
