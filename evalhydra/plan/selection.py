"""Which cases of each eval a run sends: ``run.limit``, ``run.cases``, ``run.tags``,
``run.shuffle`` with ``run.seed``, and ``run.rerun=failed``.

A selection is part of a run's record (its config, its summary and reports), never of a cell's
identity: a cell's key does not change with it, so a later full run reuses every cell a
selected run finished.
"""

from __future__ import annotations

import fnmatch
import itertools
import math
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalhydra.config.schema import RunConfig
from evalhydra.core.errors import EvalHydraError
from evalhydra.store.db import open_store

__all__ = ["RERUN_CHOICES", "CaseSelection", "failed_cases", "selection_in", "selection_of"]

#: ``run.rerun`` values: the cases whose last verdict was FAIL or ERROR.
RERUN_CHOICES = ("failed",)


@dataclass(frozen=True)
class CaseSelection:
    """The cases of each eval a run sends, in the order it sends them.

    Attributes:
        limit: At most this many cases per eval (an integer), or this share of them (in (0, 1)).
        patterns: Case ids or shell-style globs (``run.cases``); a case matching any is kept.
        tags: Dataset tags; a case with any of them is kept.
        shuffle: Send the cases in a random order (before ``limit``: a random sample).
        seed: The shuffle's seed (the same seed, the same order).
        rerun: ``failed``: only the cases in ``only``.
        only: Per eval id, the case ids ``run.rerun`` chose (None: no such filter).
    """

    limit: float | None = None
    patterns: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    shuffle: bool = False
    seed: int = 0
    rerun: str | None = None
    only: Mapping[str, frozenset[str]] | None = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return bool(self.limit is not None or self.patterns or self.tags or self.shuffle or self.rerun)

    def describe(self) -> str:
        """The selection in the words of its overrides (``limit=3, tags=[geo], shuffled (seed 0)``)."""
        parts = []
        if self.rerun:
            parts.append(f"rerun={self.rerun}")
        if self.patterns:
            parts.append(f"cases=[{','.join(self.patterns)}]")
        if self.tags:
            parts.append(f"tags=[{','.join(self.tags)}]")
        if self.shuffle:
            parts.append(f"shuffled (seed {self.seed})")
        if self.limit is not None:
            parts.append(f"limit={self.limit:g}")
        return ", ".join(parts)

    def apply(self, eval_id: str, cases: Iterable[Any]) -> Iterator[Any]:
        """The selected cases of one eval, in sending order (every case is still read: a bad
        dataset line is an error whatever is selected)."""
        kept = (case for case in cases if self._keeps(eval_id, case))
        if not self.shuffle and (self.limit is None or self.limit >= 1):
            yield from itertools.islice(kept, None if self.limit is None else int(self.limit))
            return
        chosen = list(kept)
        if self.shuffle:
            random.Random(f"{self.seed}:{eval_id}").shuffle(chosen)
        yield from chosen[: self._count(len(chosen))]

    def _count(self, available: int) -> int:
        if self.limit is None:
            return available
        if self.limit >= 1:
            return int(self.limit)
        return math.ceil(self.limit * available)

    def _keeps(self, eval_id: str, case: Any) -> bool:
        case_id = str(getattr(case, "id", None) or getattr(case, "name", ""))
        if self.only is not None and case_id not in self.only.get(eval_id, frozenset()):
            return False
        if self.patterns and not any(fnmatch.fnmatchcase(case_id, p) for p in self.patterns):
            return False
        return not self.tags or bool(set(self.tags) & set(getattr(case, "tags", ()) or ()))


def selection_of(run: RunConfig) -> CaseSelection:
    """The checked selection of ``run``.

    Raises:
        EvalHydraError: A limit that is no positive count or share, an unknown ``run.rerun``.
    """
    limit = run.limit
    if limit is not None and not _is_count_or_share(limit):
        raise EvalHydraError(f"run.limit={limit}: must be a whole number of cases (run.limit=20) or a "
                             "share of them in (0, 1) (run.limit=0.1).")
    if run.rerun is not None and run.rerun not in RERUN_CHOICES:
        raise EvalHydraError(f"run.rerun={run.rerun}: unknown.", "Use run.rerun=failed.")
    return CaseSelection(limit=None if limit is None else float(limit), patterns=tuple(map(str, run.cases)),
                         tags=tuple(map(str, run.tags)), shuffle=bool(run.shuffle), seed=int(run.seed),
                         rerun=run.rerun)


def _is_count_or_share(limit: Any) -> bool:
    """A positive whole number, or a share in (0, 1)."""
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not math.isfinite(limit):
        return False
    return 0 < limit < 1 or (limit >= 1 and limit == int(limit))


def selection_in(config: Any) -> str:
    """A stored run config's selection in words ("" when it ran every case): what its reports say."""
    run = config.get("run") if isinstance(config, Mapping) else None
    if not isinstance(run, Mapping):
        return ""
    limit = run.get("limit")
    return CaseSelection(
        limit=float(limit) if isinstance(limit, int | float) and not isinstance(limit, bool) else None,
        patterns=tuple(map(str, run.get("cases") or ())), tags=tuple(map(str, run.get("tags") or ())),
        shuffle=bool(run.get("shuffle")), seed=int(run.get("seed") or 0), rerun=run.get("rerun")).describe()


def failed_cases(store_path: Path, service: str, eval_ids: Iterable[str]) -> dict[str, frozenset[str]]:
    """Per eval, the cases whose last verdict on ``service`` was FAIL or ERROR: those of the
    latest run of that eval on that service with a trial that did not pass.

    Raises:
        EvalHydraError: The store holds no run of an eval on that service.
    """
    ids = list(eval_ids)
    if not store_path.is_file():
        raise EvalHydraError(f"run.rerun=failed: no store at {store_path} to read the last run from.",
                             "Run the eval once first (or point store.path= at its store).")
    store = open_store(store_path, read_only=True)
    try:
        return {eval_id: _failed_in_last_run(store.conn, service, eval_id, store_path) for eval_id in ids}
    finally:
        store.close()


def _failed_in_last_run(conn: Any, service: str, eval_id: str, store_path: Path) -> frozenset[str]:
    last = conn.execute(
        "select rc.run_id from run_cells rc join results r on r.cell_key = rc.cell_key"
        " and r.run_id = rc.result_run_id "
        "join runs ru on ru.run_id = rc.run_id where r.eval_id = ? and r.service_name = ? "
        "order by ru.started_at desc limit 1", (eval_id, service)).fetchone()
    if last is None:
        raise EvalHydraError(f"run.rerun=failed: the store {store_path} has no run of eval '{eval_id}' on "
                             f"service '{service}'.", "Run it once without run.rerun first.")
    rows = conn.execute(
        "select distinct r.case_id from run_cells rc join results r on r.cell_key = rc.cell_key"
        " and r.run_id = rc.result_run_id "
        "where rc.run_id = ? and r.eval_id = ? and coalesce(r.passed, 0) = 0", (last[0], eval_id))
    return frozenset(str(row[0]) for row in rows)
