"""Labelling in the viewer: the label queue, and storing a label a page sends.

The queue holds every output a judge scored in the runs (distinct by eval, case and output), in a
fixed order: a random sample stratified by the judge's verdict, in proportion to it, so that any
prefix of the queue is representative. Labelling the judge's passes beyond their share (or its
failures) would bias its measured error rates (verification bias); in proportion, the labelled
outputs are as good as a simple random sample, with the two verdicts' counts steadier. Outputs
anyone already labelled are passed over; ``after`` (a position) walks on past skipped ones.

A label is written through a writable connection opened for that one request, in its own
transaction (:func:`evalhydra.store.labels.import_labels`): the viewer writes nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalhydra.analysis.queues import next_pending
from evalhydra.core.errors import EvalHydraError
from evalhydra.store.db import immediate, open_store
from evalhydra.store.labels import import_labels, label_of, labels_by_output, output_sha256, stored_output
from evalhydra.store.rows import infra_error_sql

__all__ = ["QueueItem", "label_key", "labels_of", "next_in_queue", "save_label"]

_JUDGED_SQL = f"""select r.eval_id, r.case_id, r.output, case when r.passed then 1 else 0 end
from run_cells rc join results r on r.cell_key = rc.cell_key and r.run_id = rc.result_run_id
where rc.run_id in ({{marks}}) and r.judge_model is not null and not {infra_error_sql("r.")}
order by r.eval_id, r.case_id, r.run_index"""


@dataclass(frozen=True)
class QueueItem:
    """One output to label: its place in the queue (of ``total``) and the judge's verdict."""

    position: int
    eval_id: str
    case_id: str
    output_sha256: str
    judge_passed: bool


def label_key(token: str) -> str:
    """The value a page sends with a label (a header no other site can set): derived from the
    viewer's token, so only pages the token opened know it."""
    return hmac.new(token.encode(), b"evalhydra labels", hashlib.sha256).hexdigest()


def _order(run_ids: Sequence[str], item: tuple[str, str, str]) -> str:
    return hashlib.sha256("\0".join([*run_ids, *item]).encode("utf-8", "surrogatepass")).hexdigest()


def _queue(conn: sqlite3.Connection, run_ids: Sequence[str]) -> list[QueueItem]:
    """Every judged output of the runs, in the queue's order (see the module docstring)."""
    verdicts: dict[tuple[str, str, str], bool] = {}
    for eval_id, case_id, output, passed in conn.execute(
            _JUDGED_SQL.format(marks=", ".join("?" * len(run_ids))), list(run_ids)):
        verdicts.setdefault((eval_id, case_id, output_sha256(output)), bool(passed))
    strata: dict[bool, list[tuple[str, str, str]]] = {True: [], False: []}
    for item, passed in verdicts.items():
        strata[passed].append(item)
    placed = []
    for passed, items in strata.items():
        items.sort(key=lambda item: _order(run_ids, item))
        placed += [((rank + 0.5) / len(items), not passed, item) for rank, item in enumerate(items)]
    placed.sort()
    return [QueueItem(i, *item, judge_passed=verdicts[item]) for i, (_, _, item) in enumerate(placed)]


def next_in_queue(conn: sqlite3.Connection, run_ids: Sequence[str],
                  after: int = -1) -> tuple[QueueItem | None, int, int]:
    """The first unlabelled output past ``after``, how many of the queue are labelled, and its size."""
    return next_pending(_queue(conn, run_ids), labels_by_output(conn),
                        lambda q: (q.eval_id, q.case_id, q.output_sha256), after)


def labels_of(conn: sqlite3.Connection, eval_id: str, case_id: str) -> dict[str, str]:
    """The latest label of each labelled output of a case, by output hash."""
    return {digest: label for digest, label in conn.execute(
        "select output_sha256, label from labels where eval_id = ? and case_id = ?"
        " order by labelled_at, id", [eval_id, case_id])}


def save_label(store_path: Path, body: Mapping[str, Any], labeller: str) -> str:
    """Store one label a page sent (``eval``, ``case``, ``output_sha256``, ``label``, ``note``);
    returns the label stored.

    Raises:
        EvalHydraError: A field missing or malformed, or no such output stored for the case.
    """
    fields: dict[str, str] = {}
    for key in ("eval", "case", "output_sha256", "label", "note"):
        value = body.get(key)
        if key != "note" and (not isinstance(value, str) or not value):
            raise EvalHydraError(f"'{key}' is missing or not text.")
        if value is not None and not isinstance(value, str):
            raise EvalHydraError(f"'{key}' is not text.")
        if value is not None:
            fields[key] = value
    verdict = label_of(fields["label"], "label")
    with closing(open_store(store_path)) as store:
        if stored_output(store.conn, fields["eval"], fields["case"], fields["output_sha256"]) is None:
            raise EvalHydraError(f"no stored output of {fields['eval']}/{fields['case']} has that hash.")
        with immediate(store.conn):
            import_labels(store.conn, [("viewer", {**fields, "label": verdict})], labeller)
    return verdict
