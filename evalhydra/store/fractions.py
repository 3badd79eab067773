"""Per-case fractions of a finished run, saved beside its summary so comparisons skip its results.

When a run ends, one grouping pass over the versions it holds writes a row per
(group, eval, service, model, case) to ``case_fractions``: how many results,
distinct trials, passes and scored (not infrastructure-error) results it has,
the median time to first token of its streamed trials, and a *digest* of its
scored trials, ``"trial:passed:hash"`` joined by spaces, where ``hash`` is
the start of the BLAKE2b hash of the output: two runs' digests show which
(case, trial) pairs changed verdict on the same output (a judge's flip)
without reading outputs again. ``case_fraction_runs`` records the run and the
cells it held then; the rows count only while that equals the cells of the
run's saved summary (:func:`fractions_valid`).
"""

from __future__ import annotations

import hashlib
import sqlite3
import statistics
from collections.abc import Sequence
from typing import Any

from evalhydra.store.rows import INFRA_ERROR_SQL

__all__ = ["DIGEST_HASH_CHARS", "fractions_valid", "parse_digest", "save_case_fractions"]

#: Hex characters of an output's hash kept in a digest.
DIGEST_HASH_CHARS = 16

_SAVE_SQL = f"""insert into case_fractions (run_id, "group", eval_id, service_name, model, case_id,
  results, trials, passed, scored, ttft_ms, digest)
select :run, "group", eval_id, service_name, model, case_id, count(*), count(distinct run_index),
  sum(case when passed then 1 else 0 end), count(*) - sum({INFRA_ERROR_SQL}),
  evalhydra_median(ttft_ms) filter (where ttft_ms is not null),
  group_concat(case when not {INFRA_ERROR_SQL} then run_index || ':'
    || (case when passed then 1 else 0 end) || ':' || evalhydra_hash(output) end, ' ')
from results where {{versions}}
group by "group", eval_id, service_name, model, case_id"""

#: The versions a run holds, through its memberships.
_MEMBER_VERSIONS = "(cell_key, run_id) in (select cell_key, result_run_id from run_cells where run_id = :run)"


class _Median:
    """SQLite aggregate: the median of the non-null values (None when there are none)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def step(self, value: Any) -> None:
        if value is not None:
            self.values.append(float(value))

    def finalize(self) -> float | None:
        return statistics.median(self.values) if self.values else None


def _hash(text: Any) -> str:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text or b"")
    return hashlib.blake2b(data, digest_size=DIGEST_HASH_CHARS // 2).hexdigest()


def save_case_fractions(conn: sqlite3.Connection, run_id: str, sources: Sequence[str] = ()) -> int:
    """Replace ``run_id``'s per-case fractions with ones computed now; the caller holds the write
    transaction. Returns the cells they cover.

    Args:
        conn: The store's connection.
        run_id: The finished run.
        sources: The runs whose every row the run holds (its summary's ``sources``: a run resumed
            after a kill), read by run id rather than through a membership test per row while
            they still hold as many rows as the run has members.
    """
    conn.create_function("evalhydra_hash", 1, _hash, deterministic=True)
    conn.create_aggregate("evalhydra_median", 1, _Median)  # type: ignore[arg-type]
    conn.execute("delete from case_fractions where run_id = ?", [run_id])
    cells = int(conn.execute("select count(*) from run_cells where run_id = ?", [run_id]).fetchone()[0])
    params: dict[str, str] = {"run": run_id}
    versions = _MEMBER_VERSIONS
    if sources:
        names = {f"s{i}": source for i, source in enumerate(sources)}
        marks = ", ".join(f":{name}" for name in names)
        held = conn.execute(f"select count(*) from results where run_id in ({marks})", names).fetchone()[0]
        if held == cells:
            versions, params = f"run_id in ({marks})", {**params, **names}
    conn.execute(_SAVE_SQL.format(versions=versions), params)
    conn.execute("insert or replace into case_fraction_runs (run_id, cells) values (?, ?)", [run_id, cells])
    return cells


def fractions_valid(conn: sqlite3.Connection, run_id: str) -> bool:
    """Whether ``run_id`` has per-case fractions that still describe it: it has ended, and they
    cover the cells its saved summary covers, which are the cells it holds."""
    found = conn.execute(
        "select 1 from case_fraction_runs f join run_summaries s on s.run_id = f.run_id"
        " join runs r on r.run_id = f.run_id where f.run_id = ? and r.status != 'running'"
        " and f.cells = s.cells and s.cells = (select count(*) from run_cells where run_id = f.run_id)",
        [run_id]).fetchone()
    return found is not None


def parse_digest(digest: str | None) -> dict[int, tuple[int, str]]:
    """A digest as ``{trial: (passed, output hash)}``."""
    out: dict[int, tuple[int, str]] = {}
    for part in (digest or "").split():
        trial, passed, output = part.split(":", 2)
        out[int(trial)] = (int(passed), output)
    return out
