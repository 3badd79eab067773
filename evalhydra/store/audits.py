"""People's audits of simulated users (``simulator_audits``): did the simulator break the task?

An audit names its eval and case and the conversation it read, by the SHA-256 of the stored
transcript (``details.trajectory.transcript``, as stored): it holds for every stored result with
that transcript, and for no other. ``broke`` is 1 when the person found that the simulated user,
not the agent, ended the task's chances (``kind``: one of
:data:`~evalhydra.plan.users.ERROR_KINDS`-like names, or ``other``), 0 when it played its part. One
audit per conversation and labeller: a second replaces the first.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.store.rows import now_iso

__all__ = ["AUDIT_KINDS", "audits_by_transcript", "save_audit", "stored_transcript", "transcript_sha256"]

#: What a person may say broke a conversation (τ²-bench's simulator failures, and anything else).
AUDIT_KINDS = ("premature_stop", "goal_drift", "leaked_answer", "contradicted_instructions", "other")
#: A conversation's transcript as stored (the text of its JSON in ``results.details``).
TRANSCRIPT_SQL = "json_extract(details, '$.trajectory.transcript')"


def transcript_sha256(transcript: str | None) -> str:
    """The hash an audit keys a conversation by: of its stored transcript's JSON text."""
    return hashlib.sha256((transcript or "").encode("utf-8", "surrogatepass")).hexdigest()


def stored_transcript(conn: sqlite3.Connection, eval_id: str, case_id: str, digest: str) -> str | None:
    """The stored transcript of ``eval_id``/``case_id`` whose hash is ``digest`` (None: none is)."""
    sql = (f"select distinct {TRANSCRIPT_SQL} from results where eval_id = ? and case_id = ?"
           f" and {TRANSCRIPT_SQL} is not null")
    found = (text for (text,) in conn.execute(sql, [eval_id, case_id]) if transcript_sha256(text) == digest)
    return next(found, None)


def save_audit(conn: sqlite3.Connection, audit: Mapping[str, Any], labeller: str) -> None:
    """Store one audit (``eval``, ``case``, ``transcript_sha256``, ``broke``, ``kind``, ``note``),
    replacing the labeller's earlier one of that conversation; the caller holds the transaction.

    Raises:
        EvalHydraError: A field is malformed, or no stored conversation of the case has that hash.
    """
    broke = audit.get("broke")
    if not isinstance(broke, bool):
        raise EvalHydraError("'broke' must be true (the simulator broke the task) or false.")
    kind = audit.get("kind")
    if broke and kind not in AUDIT_KINDS:
        raise EvalHydraError(f"'kind' must be one of {', '.join(AUDIT_KINDS)} when the simulator broke"
                             " the task.")
    fields = [audit.get(k) for k in ("eval", "case", "transcript_sha256")]
    if not all(isinstance(f, str) and f for f in fields):
        raise EvalHydraError("'eval', 'case' and 'transcript_sha256' are required (text).")
    if stored_transcript(conn, *fields) is None:  # type: ignore[arg-type]
        raise EvalHydraError(f"no stored conversation of {fields[0]}/{fields[1]} has that transcript hash.")
    conn.execute("insert into simulator_audits (eval_id, case_id, transcript_sha256, broke, kind, labeller,"
                 " labelled_at, note) values (?, ?, ?, ?, ?, ?, ?, ?)"
                 " on conflict (eval_id, case_id, transcript_sha256, labeller) do update set"
                 " broke = excluded.broke, kind = excluded.kind, labelled_at = excluded.labelled_at,"
                 " note = excluded.note",
                 [*fields, int(broke), kind if broke else None, labeller, now_iso(), audit.get("note")])


def audits_by_transcript(conn: sqlite3.Connection) -> dict[tuple[str, str, str], tuple[bool, str | None]]:
    """Each audited conversation's latest audit: (broke, kind), by (eval, case, transcript hash)."""
    found: dict[tuple[str, str, str], tuple[bool, str | None]] = {}
    for eval_id, case_id, digest, broke, kind in conn.execute(
            "select eval_id, case_id, transcript_sha256, broke, kind from simulator_audits"
            " order by labelled_at, id"):
        found[(eval_id, case_id, digest)] = (bool(broke), kind)
    return found
