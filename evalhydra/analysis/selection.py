"""Which ``results`` rows a report covers, as SQL, plus shared SQL expressions.

A report covers the cells of one or more runs (``run_cells``). Every
aggregate is computed inside SQLite over ``SELECT … FROM results WHERE
<selection>``, so reports over millions of results never load the rows into
Python.

A cell may have several versions (one per run that wrote it); a run's
membership names the one it holds (``run_cells.result_run_id``). When every
cell of the selected runs was produced by those runs, once each, the selection
is simply ``run_id IN (…)``, which SQLite answers from the ``run_id`` index or
one table scan; otherwise it is the versions the memberships name
(:func:`versions_of_runs`).

When the runs hold most of the table, reading it straight through is several
times faster than visiting each row through an index (``bench/report_scale.py``),
so full passes read ``FROM {sel.table}``, which is
then ``results NOT INDEXED``. Queries whose ``ORDER BY`` an index provides
(``runs.json``) read plain ``results``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DURATION_SQL",
    "PASSED_SQL",
    "SEED_ORDER_SQL",
    "STATUS_SQL",
    "TRIAL_ORDER_SQL",
    "DENSE_FRACTION",
    "Selection",
    "select_runs",
    "versions_of_runs",
]

#: The trial status: the stored one, else derived from ``error_kind``/``passed``.
STATUS_SQL = (
    "coalesce(status, case when error_kind is not null then 'ERROR' "
    "when passed then 'PASS' else 'FAIL' end)"
)
#: 1 when the result passed, else 0.
PASSED_SQL = "(case when passed then 1 else 0 end)"
#: Seconds: agent trials store ``duration_s``, chat cells ``latency_ms``.
DURATION_SQL = "coalesce(duration_s, latency_ms / 1000.0, 0.0)"
#: zig_eval's runner order (runs.json, results.jsonl).
SEED_ORDER_SQL = '"group", eval_id, service_name, run_index, case_id, model'
#: zrb's per-trial order: model (service/model), case (eval/case), trial.
TRIAL_ORDER_SQL = "service_name, model, eval_id, case_id, run_index"


@dataclass(frozen=True)
class Selection:
    """A SQL condition on ``results`` selecting the cells of some runs.

    Attributes:
        run_ids: The runs, in the order given.
        where: Condition on ``results`` columns (no table alias).
        params: Its parameters.
        table: What full passes over the selection read: ``results``, or
            ``results NOT INDEXED`` when the selection is most of the table.
        whole: The selection is every row of the runs ``params`` names (``where`` is
            ``run_id IN (…)``).
    """

    run_ids: tuple[str, ...]
    where: str
    params: tuple[Any, ...]
    table: str = "results"
    whole: bool = False

    def ordered(self, columns: str, order_by: str, *, extra: str = "", limit: bool = False) -> str:
        """``SELECT columns`` over the selection in ``order_by`` order, for streaming.

        SQLite sorts only the row ids, in a subquery whose ``LIMIT`` makes it
        honour its ``ORDER BY`` (a co-routine); ``CROSS JOIN`` keeps it the
        outer loop, so rows come out in that order and wide computed columns
        (JSON text) never pass through the sorter. Parameters, in SQL text
        order: any in ``columns``, the selection's, ``extra``'s, then the limit
        (when ``limit``).
        """
        cond = f"({self.where}) and ({extra})" if extra else self.where
        tail = "?" if limit else "-1"
        return (
            f"select {columns} from (select rowid as rid from {self.table} where {cond}"
            f" order by {order_by} limit {tail}) as ordered cross join results"
            " on results.rowid = ordered.rid"
        )

    def source(self, columns: str = "*", extra: str = "") -> str:
        """``SELECT columns FROM results WHERE <selection> [AND extra]``."""
        cond = f"({self.where}) and ({extra})" if extra else self.where
        return f"select {columns} from {self.table} where {cond}"


#: A selection holding at least this share of ``results`` is read by a table scan.
DENSE_FRACTION = 0.2


def _table_size(conn: sqlite3.Connection) -> int:
    """Rows in ``results``, estimated from the largest rowid (no scan)."""
    return int(conn.execute("select coalesce(max(rowid), 0) from results").fetchone()[0])


def select_runs(conn: sqlite3.Connection, run_ids: Sequence[str]) -> Selection:
    """The selection covering every cell of ``run_ids``.

    Args:
        conn: A connection to the store.
        run_ids: Full run ids.

    Returns:
        A :class:`Selection`; ``run_id IN (…)`` when no cell was resumed from
        another run, the ``run_cells`` membership test otherwise.
    """
    ids = tuple(dict.fromkeys(run_ids))
    if not ids:
        return Selection((), "0", ())
    marks = ", ".join("?" * len(ids))
    members = conn.execute(f"select count(*) from run_cells where run_id in ({marks})", ids).fetchone()[0]
    own = conn.execute(f"select count(*) from results where run_id in ({marks})", ids).fetchone()[0]
    # A run writes a cell at most once, and its membership then names that row: when its members are
    # as many as its rows, they are its rows. Several runs also need each cell once among them.
    once = len(ids) == 1 or members == conn.execute(
        f"select count(distinct cell_key) from run_cells where run_id in ({marks})", ids).fetchone()[0]
    if members == own and once:
        return _whole_runs(conn, ids, ids, own)
    sources = None
    if len(ids) == 1:
        sources = _saved_sources(conn, ids[0], members)
    if sources is None and once:
        sources = _whole_sources(conn, ids, marks)
    if sources is not None:  # a resumed run: every row of the runs it reused is one of its cells
        return _whole_runs(conn, ids, sources, members)
    return Selection(ids, versions_of_runs(len(ids)), ids)


def _whole_runs(conn: sqlite3.Connection, ids: tuple[str, ...], sources: tuple[str, ...],
                rows: int) -> Selection:
    """The selection of ``ids`` when it is every row of the runs ``sources`` (``rows`` in all)."""
    dense = rows >= DENSE_FRACTION * _table_size(conn)
    return Selection(ids, f"run_id in ({', '.join('?' * len(sources))})", sources,
                     table="results not indexed" if dense else "results", whole=True)


def _saved_sources(conn: sqlite3.Connection, run_id: str, members: int) -> tuple[str, ...] | None:
    """The runs a finished run's saved summary found it holds whole (``sources``), when they still
    hold exactly its ``members`` rows: no pass over its memberships."""
    found = conn.execute("select json_extract(summary, '$.sources') from run_summaries where run_id = ?"
                         " and cells = ?", [run_id, members]).fetchone()
    if found is None or not found[0]:
        return None
    sources = tuple(str(s) for s in json.loads(found[0]))
    return sources if sum(_stored_rows(conn, s) for s in sources) == members else None


def _whole_sources(conn: sqlite3.Connection, ids: tuple[str, ...], marks: str) -> tuple[str, ...] | None:
    """The runs whose rows the memberships of ``ids`` name, when they name every row of each (a
    run resumed after a kill holds all that the killed run stored): the selection is then those
    runs' rows, read by ``run_id``, not a membership test per row. None when some row is not named."""
    named = conn.execute(f"select result_run_id, count(*) from run_cells where run_id in ({marks})"
                         " group by result_run_id", ids).fetchall()
    if any(_stored_rows(conn, run_id) != count for run_id, count in named):
        return None
    return tuple(run_id for run_id, _ in named)


def _stored_rows(conn: sqlite3.Connection, run_id: str) -> int:
    """The rows ``run_id`` wrote (counted on its index)."""
    return int(conn.execute("select count(*) from results where run_id = ?", [run_id]).fetchone()[0])


def versions_of_runs(count: int) -> str:
    """The condition on ``results`` selecting the versions ``count`` runs (``?`` each) hold: each
    run's own, and for a cell two of them hold in different versions, the newest run's."""
    marks = ", ".join("?" * count)
    if count == 1:
        return "(cell_key, run_id) in (select cell_key, result_run_id from run_cells where run_id = ?)"
    return (f"(cell_key, run_id) in (select cell_key, result_run_id from (select rc.cell_key,"
            f" rc.result_run_id, max(coalesce(ru.started_at, '') || rc.result_run_id) from run_cells rc"
            f" left join runs ru on ru.run_id = rc.result_run_id where rc.run_id in ({marks})"
            f" group by rc.cell_key))")
