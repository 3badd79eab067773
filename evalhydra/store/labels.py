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
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.store.rows import now_iso

__all__ = ["LABELS", "import_labels", "label_of", "labels_by_output", "output_sha256", "stored_output"]

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


def import_labels(conn: sqlite3.Connection, rows: Iterable[tuple[str, Mapping[str, Any]]],
                  labeller: str = "") -> int:
    """Store labels (``(where, row)`` pairs: ``eval``, ``case``, ``label``, and the output named as
    the module says; optionally ``labeller``, ``note``, ``score``), replacing a labeller's earlier
    label of the same output. The caller holds the write transaction. Returns how many."""
    count = 0
    for where, row in rows:
        for key in ("eval", "case", "label"):
            if not row.get(key):
                raise EvalHydraError(f"{where}: '{key}' is missing.",
                                     "Each row: eval, case, label (PASS/FAIL).")
        digest, output = _output_of(conn, row, where)
        conn.execute(
            "insert into labels (eval_id, case_id, output_sha256, output, label, score, labeller,"
            " labelled_at, note) values (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " on conflict (eval_id, case_id, output_sha256, labeller)"
            " do update set label = excluded.label, score = excluded.score, output = excluded.output,"
            " labelled_at = excluded.labelled_at, note = excluded.note",
            [row["eval"], row["case"], digest, output, label_of(row["label"], where),
             row.get("score"), str(row.get("labeller") or labeller), now_iso(), row.get("note")])
        count += 1
    return count


def labels_by_output(conn: sqlite3.Connection) -> dict[tuple[str, str, str], bool]:
    """Every labelled output: (eval, case, output hash) -> the human verdict (the latest label of
    it wins when labellers disagree)."""
    out: dict[tuple[str, str, str], bool] = {}
    for eval_id, case_id, digest, label in conn.execute(
            "select eval_id, case_id, output_sha256, label from labels order by labelled_at, id"):
        out[(eval_id, case_id, digest)] = label == "PASS"
    return out
