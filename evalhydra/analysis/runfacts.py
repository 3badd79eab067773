"""What a run's terminal summary says beyond the figures, read from the store: the commonest
infrastructure-error reasons, the first failing cases, the results reused from earlier runs and
the errors among them, and the run's wall time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalhydra.analysis.selection import select_runs
from evalhydra.store.db import Store
from evalhydra.store.rows import INFRA_ERROR_SQL, infra_error_sql

__all__ = ["Reasons", "duration_s", "error_reasons", "failing_cases", "reused_errors", "reused_results"]


Reasons = dict[tuple[str, str, str], list[tuple[str, int]]]


def error_reasons(store: Store, run_ids: Sequence[str], limit: int = 3) -> Reasons:
    """Per eval × service × model, the most frequent infrastructure-error reasons with their cell counts.

    A reason is the last HTTP attempt's message when there is one (``ConnectError: all
    attempts to connect to 127.0.0.1:9 failed``), else the stored failure reason.
    """
    sel = select_runs(store.conn, run_ids)
    sql = f"""select eval_id, service_name, coalesce(model, ''), coalesce(
          (select a.error_message from attempts a where a.cell_key = results.cell_key
             and a.error_message is not null order by a.rowid desc limit 1),
          failure_reason, error_kind, status) as reason, count(*) as n
        from {sel.table} where ({sel.where}) and {INFRA_ERROR_SQL}
        group by 1, 2, 3, 4 order by 1, 2, 3, n desc, reason"""
    out: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for eval_id, service, model, reason, n in store.conn.execute(sql, sel.params):
        reasons = out.setdefault((eval_id, service, model), [])
        if len(reasons) < limit:
            reasons.append((str(reason), int(n)))
    return out


def failing_cases(store: Store, run_ids: Sequence[str], limit: int = 5) -> list[dict[str, Any]]:
    """Scored failures (not infrastructure errors), the first ``limit`` in eval and case order."""
    sel = select_runs(store.conn, run_ids)
    sql = f"""select eval_id, service_name, model, case_id, run_index, failure_reason, ideal,
        substr(output, 1, 200) as output
        from {sel.table} where ({sel.where}) and not passed and not {INFRA_ERROR_SQL}
        order by eval_id, service_name, model, case_id, run_index limit ?"""
    return list(store.query(sql, [*sel.params, limit + 1]))


def reused_results(store: Store, run_id: str) -> list[tuple[str, str, int]]:
    """The earlier runs whose stored results this run took instead of asking again: (run id, when
    it started, cells), oldest first."""
    others = _whole_others(store, run_id)
    if others == ():
        return []
    if others is not None:  # it holds each of them whole: count their rows by run id
        sql = (f"select r.run_id, coalesce(ru.started_at, ''), count(*) from results r left join runs ru"
               f" on ru.run_id = r.run_id where r.run_id in ({', '.join('?' * len(others))})"
               " group by r.run_id order by ru.started_at, r.run_id")
        return [(str(r), str(at), int(n)) for r, at, n in store.conn.execute(sql, others)]
    return [(str(r), str(at), int(n)) for r, at, n in store.conn.execute(
        "select rc.result_run_id, coalesce(ru.started_at, ''), count(*) from run_cells rc"
        " left join runs ru on ru.run_id = rc.result_run_id"
        " where rc.run_id = ? and rc.result_run_id != rc.run_id"
        " group by rc.result_run_id order by ru.started_at, rc.result_run_id", [run_id])]


def _whole_others(store: Store, run_id: str) -> tuple[str, ...] | None:
    """The other runs whose every row ``run_id`` holds, when its selection is whole runs (a run
    resumed after a kill); None when it holds only some of another run's rows."""
    sel = select_runs(store.conn, [run_id])
    return tuple(str(r) for r in sel.params if r != run_id) if sel.whole else None


def duration_s(store: Store, run_id: str) -> float:
    row = store.conn.execute(
        "select (julianday(coalesce(finished_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))"
        " - julianday(started_at)) * 86400 from runs where run_id = ?", [run_id]).fetchone()
    return float(row[0] or 0.0) if row else 0.0


def reused_errors(store: Store, run_id: str) -> int:
    """Infrastructure errors stored by an earlier run that this run kept instead of re-sending."""
    others = _whole_others(store, run_id)
    if others is not None:
        if not others:
            return 0
        sql = (f"select count(*) from results r where r.run_id in ({', '.join('?' * len(others))})"
               f" and {infra_error_sql('r.')}")
        return int(store.conn.execute(sql, others).fetchone()[0])
    sql = f"""select count(*) from run_cells rc join results r on r.cell_key = rc.cell_key
      and r.run_id = rc.result_run_id
        where rc.run_id = ? and r.run_id != ? and {infra_error_sql("r.")}"""
    return int(store.conn.execute(sql, [run_id, run_id]).fetchone()[0])
