"""Summaries of running runs kept up to date by reading only the cells stored since the last look.

A finished run's summary is saved (:mod:`evalhydra.analysis.runsummary`); a running
one's changes with every cell. The viewer keeps, per running run, each target's
totals and each (target, case)'s scored and passed trials, and on every request
adds the memberships written since its watermark (``run_cells`` rows, which a
run only appends while it runs). If the run holds a different number of cells
than were added (a membership replaced, a store swapped under the viewer), the
summary is built again from the start. The first look at a run pays one pass
over its results; every later one reads only what is new.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evalhydra.analysis.selection import DURATION_SQL, PASSED_SQL
from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["LiveSummaries"]

#: Targets are (group, eval, service, model).
_Target = tuple[str, str, str, str]

_NEW_CELLS_SQL = f"""select rc.rowid, r."group", r.eval_id, r.service_name, coalesce(r.model, ''),
  r.case_id, {PASSED_SQL}, {INFRA_ERROR_SQL},
  coalesce(r.prompt_tokens, 0) + coalesce(r.completion_tokens, 0) + coalesce(r.judge_prompt_tokens, 0)
    + coalesce(r.judge_completion_tokens, 0),
  coalesce(r.reasoning_tokens, 0), coalesce(r.cost_usd, 0) + coalesce(r.judge_cost_usd, 0), {DURATION_SQL},
  coalesce(r.judge_service, ''), r.judge_model, r.run_id
from run_cells rc join results r on r.cell_key = rc.cell_key and r.run_id = rc.result_run_id
where rc.run_id = ? and rc.rowid > ? order by rc.rowid"""

#: The totals kept per target, in :func:`evalhydra.analysis.runsummary.run_summary`'s names.
_TOTALS = ("n", "passed", "errors", "tokens", "thinking", "cost", "seconds")


@dataclass
class _Running:
    """What has been added of one running run: up to which ``run_cells`` row, and the counts."""

    watermark: int = 0
    cells: int = 0
    totals: dict[_Target, list[float]] = field(default_factory=dict)
    cases: dict[_Target, dict[str, list[int]]] = field(default_factory=dict)  # case -> [scored, passed]
    # (judge service, judge model, the result's run) -> the scored results it judged
    judges: dict[_Target, Counter[tuple[str, str, str]]] = field(default_factory=dict)

    def add(self, rows: Iterable[tuple[Any, ...]]) -> None:
        for rowid, group, eval_id, service, model, case, passed, error, *rest in rows:
            spent, (judge_service, judge_model, run_id) = rest[:-3], rest[-3:]
            target = (group, eval_id, service, model)
            totals = self.totals.setdefault(target, [0, 0, 0, 0, 0, 0.0, 0.0])
            for i, value in enumerate((1, passed, error, *spent)):
                totals[i] += value or 0
            judges = self.judges.setdefault(target, Counter())
            if judge_model is not None and not error:
                judges[(judge_service, judge_model, run_id)] += 1
            counts = self.cases.setdefault(target, {}).setdefault(case, [0, 0])
            counts[0] += 0 if error else 1
            counts[1] += passed
            self.watermark = max(self.watermark, rowid)
            self.cells += 1

    def summary(self) -> dict[str, Any]:
        """The run's summary in :func:`~evalhydra.analysis.runsummary.run_summary`'s shape (grader
        figures are left to the summary saved when it ends)."""
        targets = []
        for target in sorted(self.totals, key=lambda t: (t[1], t[2], t[3], t[0])):
            hist = Counter((scored, ok) for scored, ok in self.cases[target].values() if scored)
            totals = dict(zip(_TOTALS, self.totals[target], strict=True))
            targets.append({"group": target[0], "eval": target[1], "service": target[2], "model": target[3],
                            **{k: int(v) if k in ("n", "passed", "errors", "tokens", "thinking") else v
                               for k, v in totals.items()},
                            "hist": [[s, ok, c] for (s, ok), c in sorted(hist.items())],
                            "judges": [[*judge, n] for judge, n in sorted(self.judges[target].items())]})
        return {"cells": self.cells, "targets": targets, "graders": []}


class LiveSummaries:
    """Running runs' summaries, each brought up to date by what was stored since the last call."""

    def __init__(self) -> None:
        self._runs: dict[str, _Running] = {}
        self._lock = threading.Lock()  # the viewer answers requests on several threads

    def summary(self, conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
        """``run_id``'s summary now (a running run's: :func:`run_summary`'s figures, no graders)."""
        with self._lock:
            running = self._runs.get(run_id) or _Running()
            conn.execute("begin")  # one snapshot: the new cells and the count agree
            try:
                running.add(conn.execute(_NEW_CELLS_SQL, [run_id, running.watermark]))
                held = conn.execute("select count(*) from run_cells where run_id = ?", [run_id]).fetchone()[0]
                if held != running.cells:  # a membership replaced: count again from the start
                    running = _Running()
                    running.add(conn.execute(_NEW_CELLS_SQL, [run_id, 0]))
            finally:
                conn.execute("commit")
            self._runs[run_id] = running
            return running.summary()

    def drop(self, run_id: str) -> None:
        """Forget ``run_id`` (it has ended: its saved summary, or its results, tell the rest)."""
        with self._lock:
            self._runs.pop(run_id, None)
