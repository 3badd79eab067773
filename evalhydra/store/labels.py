"""People's verdicts on stored outputs (``labels``), keyed to the case and the output judged.

A label names its eval and case and the output it judged, by the output's SHA-256: it holds for
every stored result with that output (a rerun that answers the same, a rejudge), and for no other.
A row to import names the output by its text (``output``), its hash (``output_sha256``), or the
run and trial it was stored by (``run``, ``trial``); or by nothing, when the case has one output.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.store.rows import now_iso

__all__ = ["LABELS", "LabelImport", "import_labels", "label_of", "labels_by_output", "output_sha256",
           "stored_output"]

#: What a label may say, and its verdict.
LABELS = {"pass": "PASS", "fail": "FAIL", "1": "PASS", "0": "FAIL", "true": "PASS", "false": "FAIL",
          "yes": "PASS", "no": "FAIL"}


def output_sha256(output: str | None) -> str:
    """The hash a label keys an output by."""
    return hashlib.sha256((output or "").encode("utf-8", "surrogatepass")).hexdigest()


def label_of(value: Any, where: str) -> str:
    """``PASS`` or ``FAIL`` from a row's label.

    Raises:
        EvalHydraError: Anything else.
    """
    found = LABELS.get(str(value).strip().lower())
    if found is None:
        raise EvalHydraError(f"{where}: label {value!r} is not PASS or FAIL.", "Write PASS or FAIL (or 1/0).")
    return found


def stored_output(conn: sqlite3.Connection, eval_id: str, case_id: str, digest: str) -> str | None:
    """The stored output of a case with this hash (None: no such output is stored)."""
    for (output,) in conn.execute("select distinct output from results where eval_id = ? and case_id = ?",
                                  [eval_id, case_id]):
        if output_sha256(output) == digest:
            return output or ""
    return None


def _output_of(conn: sqlite3.Connection, row: Mapping[str, Any], where: str) -> tuple[str, str | None]:
    """The labelled output's hash and, when known, its text."""
    if row.get("output_sha256"):
        digest = str(row["output_sha256"])
        return digest, stored_output(conn, row["eval"], row["case"], digest)
    if row.get("output") is not None:
        return output_sha256(str(row["output"])), str(row["output"])
    return _hash_of(conn, row, where)


def _hash_of(conn: sqlite3.Connection, row: Mapping[str, Any], where: str) -> tuple[str, str | None]:
    eval_id, case_id = row["eval"], row["case"]
    if row.get("run"):
        found = conn.execute(
            "select r.output from run_cells rc join results r on r.cell_key = rc.cell_key"
            " and r.run_id = rc.result_run_id where rc.run_id = ? and r.eval_id = ? and r.case_id = ?"
            " and r.run_index = ?", [row["run"], eval_id, case_id, int(row.get("trial") or 1)]).fetchone()
        if found is None:
            raise EvalHydraError(f"{where}: run {row['run']} holds no trial {row.get('trial') or 1} of"
                                 f" {eval_id}/{case_id}.")
        return output_sha256(found[0]), found[0] or ""
    outputs = {row[0] for row in conn.execute(
        "select output from results where eval_id = ? and case_id = ?", [eval_id, case_id])}
    if len(outputs) != 1:
        raise EvalHydraError(f"{where}: {eval_id}/{case_id} has {len(outputs)} different stored outputs.",
                             "Name the one judged: output, output_sha256, or run and trial.")
    output = outputs.pop()
    return output_sha256(output), output or ""


@dataclass
class LabelImport:
    """What an import did with its rows.

    Attributes:
        read: Rows read.
        stored: Labels written (one per output and labeller).
        merged: Rows that named an output and labeller another row of the file named too (the
            later row is kept).
        unmatched: ``where: what`` for each row whose output matches no stored result (stored only
            when the import allows it).
    """

    read: int = 0
    stored: int = 0
    merged: int = 0
    unmatched: list[str] = field(default_factory=list)


#: How many unmatched rows a refusal names.
NAMED_UNMATCHED = 3


class _StoredHashes:
    """The hashes of each (eval, case)'s stored outputs, read once per case."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.known: dict[tuple[str, str], set[str]] = {}

    def problem(self, eval_id: str, case_id: str, digest: str) -> str | None:
        """Why no stored result has this output, or None when one has."""
        key = (eval_id, case_id)
        if key not in self.known:
            self.known[key] = {output_sha256(o) for (o,) in self.conn.execute(
                "select distinct output from results where eval_id = ? and case_id = ?", key)}
        if digest in self.known[key]:
            return None
        if self.known[key]:
            return f"{eval_id}/{case_id} has no stored output with this text or hash"
        if self.conn.execute("select 1 from results where eval_id = ? limit 1", [eval_id]).fetchone():
            return f"eval {eval_id!r} has no case {case_id!r} in the store"
        return f"no eval {eval_id!r} in the store"


#: Fields of a label row that must be text when given, and the one that must be a whole number.
_TEXT_FIELDS = ("eval", "case", "output", "output_sha256", "run", "labeller", "note")


def _checked_types(where: str, row: Mapping[str, Any]) -> None:
    """Refuse a row whose fields have the wrong JSON types (an id as a list, a trial as text)."""
    for key in _TEXT_FIELDS:
        if row.get(key) is not None and not isinstance(row[key], str):
            raise EvalHydraError(f"{where}: '{key}' must be text, not {type(row[key]).__name__}.",
                                 "Each row: eval, case, label (PASS/FAIL); output or run and trial.")
    trial = row.get("trial")
    if trial not in (None, "") and not (isinstance(trial, int) and not isinstance(trial, bool)
                                        or isinstance(trial, str) and trial.strip().isdigit()):
        raise EvalHydraError(f"{where}: 'trial' must be a whole number, not {trial!r}.")
    score = row.get("score")
    if score not in (None, "") and not isinstance(score, int | float | str):
        raise EvalHydraError(f"{where}: 'score' must be a number, not {type(score).__name__}.")


def _parsed(conn: sqlite3.Connection, where: str, row: Mapping[str, Any],
            labeller: str) -> tuple[tuple[str, str, str, str], list[Any]]:
    for key in ("eval", "case", "label"):
        if not row.get(key):
            raise EvalHydraError(f"{where}: '{key}' is missing.", "Each row: eval, case, label (PASS/FAIL).")
    _checked_types(where, row)
    digest, output = _output_of(conn, row, where)
    who = str(row.get("labeller") or labeller)
    values = [row["eval"], row["case"], digest, output, label_of(row["label"], where), row.get("score"),
              who, now_iso(), row.get("note")]
    return (str(row["eval"]), str(row["case"]), digest, who), values


def import_labels(conn: sqlite3.Connection, rows: Iterable[tuple[str, Mapping[str, Any]]],
                  labeller: str = "", *, allow_unmatched: bool = False) -> LabelImport:
    """Store labels (``(where, row)`` pairs: ``eval``, ``case``, ``label``, and the output named as
    the module says; optionally ``labeller``, ``note``, ``score``), replacing a labeller's earlier
    label of the same output. The caller holds the write transaction.

    Args:
        conn: The store.
        rows: Where each row came from (``file:line``) and the row.
        labeller: Who labelled, for rows that do not say.
        allow_unmatched: Store labels whose output matches no stored result (labels gathered
            before the run); by default they are refused.

    Returns:
        The :class:`LabelImport` account.

    Raises:
        EvalHydraError: A row is malformed, or (without ``allow_unmatched``) matches no stored
            output; nothing is stored then.
    """
    account, kept = LabelImport(), {}
    hashes = _StoredHashes(conn)
    for where, row in rows:
        account.read += 1
        key, values = _parsed(conn, where, row, labeller)
        problem = hashes.problem(key[0], key[1], key[2])
        if problem:
            account.unmatched.append(f"{where}: {problem}")
        account.merged += key in kept
        kept[key] = values
    if account.unmatched and not allow_unmatched:
        named = "; ".join(account.unmatched[:NAMED_UNMATCHED])
        extra = len(account.unmatched) - NAMED_UNMATCHED
        more = f" (and {extra} more)" if extra > 0 else ""
        raise EvalHydraError(f"{len(account.unmatched)} label row(s) match no stored output, nothing stored:"
                             f" {named}{more}.",
                             "Check the eval and case ids and the output; labels gathered before a run:"
                             " --allow-unmatched.")
    for values in kept.values():
        conn.execute(
            "insert into labels (eval_id, case_id, output_sha256, output, label, score, labeller,"
            " labelled_at, note) values (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " on conflict (eval_id, case_id, output_sha256, labeller)"
            " do update set label = excluded.label, score = excluded.score, output = excluded.output,"
            " labelled_at = excluded.labelled_at, note = excluded.note", values)
    account.stored = len(kept)
    return account


def labels_by_output(conn: sqlite3.Connection) -> dict[tuple[str, str, str], bool]:
    """Every labelled output: (eval, case, output hash) -> the human verdict (the latest label of
    it wins when labellers disagree)."""
    out: dict[tuple[str, str, str], bool] = {}
    for eval_id, case_id, digest, label in conn.execute(
            "select eval_id, case_id, output_sha256, label from labels order by labelled_at, id"):
        out[(eval_id, case_id, digest)] = label == "PASS"
    return out
