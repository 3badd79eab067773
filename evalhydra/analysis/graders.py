"""Per-criterion figures of OpenAI Evals suites (``openai_graders``): each grader's pass rate and
mean score per eval × service × model, read in SQL from ``results.grader_scores``."""

from __future__ import annotations

import sqlite3
from typing import Any

from evalhydra.analysis.selection import Selection

__all__ = ["grader_rows"]

_SQL = """select eval_id, service_name, coalesce(model, ''), g.key, count(*),
  sum(json_extract(g.value, '$.passed')), avg(json_extract(g.value, '$.score'))
from {table}, json_each(case when json_valid(results.grader_scores) then results.grader_scores
  else '{{}}' end) g
where ({where}) and results.grader_scores is not null
group by eval_id, service_name, coalesce(model, ''), g.key order by 1, 2, 3, 4"""


def grader_rows(conn: sqlite3.Connection, sel: Selection) -> list[dict[str, Any]]:
    """Per eval × service × model × criterion: results graded, passes, pass rate and mean score
    ([] when no result of the selection was graded by named criteria). A ``grader_scores`` that
    is not JSON (a NaN an older evalhydra wrote) is left out."""
    rows = []
    for eval_id, service, model, grader, n, passed, mean in conn.execute(
            _SQL.format(table=sel.table, where=sel.where), sel.params):
        rows.append({"eval": eval_id, "service": service, "model": model, "grader": grader, "n": n,
                     "passed": int(passed or 0), "pass_rate": (passed or 0) / n if n else None,
                     "mean_score": mean})
    return rows
