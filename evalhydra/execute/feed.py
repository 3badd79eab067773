"""The run's producer's outlets: pending cells to the workers, stored cells to the run's members."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import trio

from evalhydra.execute.jobqueue import JobQueue
from evalhydra.execute.outcome import RunOutcome
from evalhydra.execute.progress import Progress
from evalhydra.execute.writer import RowSink
from evalhydra.plan.cells import CellJob
from evalhydra.store.claims import Claims
from evalhydra.store.inserts import ReusedCells

__all__ = ["Feed"]

#: Stored cells met since cells were last sent, recorded before the next are sent.
_SKIPPED_BATCH = 4096
#: Most stored cells held before they are recorded as the run's members.
_REUSED_MAX = 1 << 17


@dataclass
class Feed:
    """The producer's outlets: workers for claimed cells, members for stored ones."""

    run_id: str
    rows: RowSink
    outcome: RunOutcome
    progress: Progress
    claims: Claims | None
    jobs: JobQueue[CellJob]
    done: Mapping[str, str]  # stored cells: the run that stored the version the plan read
    reused: list[str] = field(default_factory=list)  # stored cells met, not yet sent to the writer

    async def send(self, jobs: list[CellJob]) -> None:
        """Claim ``jobs`` (when claims are on) and send the claimed ones to the workers."""
        if not jobs:
            return
        if len(self.reused) >= _SKIPPED_BATCH:
            await self.flush_reused()
        if self.claims is not None:
            result = await trio.to_thread.run_sync(self.claims.claim, [job.key for job in jobs])
            await self.skip(result.stored)  # stored by another run since the plan was read
            self.outcome.held_elsewhere += len(result.held)
            self.outcome.holders.update(result.held.values())
            self.progress.skip(len(result.held))
            claimed = set(result.claimed)
            jobs = [job for job in jobs if job.key in claimed]
        await self.jobs.put(jobs)

    async def skip(self, keys: list[str]) -> None:
        """Record cells another run stored since the plan was read as members of this run: the
        store names each one's newest version."""
        if keys:
            await self.rows.put(members=[(self.run_id, key) for key in keys])
            self._count_skipped(len(keys))

    def reuse(self, key: str) -> bool:
        """Record a cell stored before the run as a member of it, naming the version the plan read.

        Returns:
            Whether enough are held that :meth:`flush_reused` is due (a plain call per stored
            cell, not a coroutine: a resumed run meets hundreds of thousands of them).
        """
        self.reused.append(key)
        return len(self.reused) >= _REUSED_MAX

    async def flush_reused(self) -> None:
        """Send the reused cells recorded so far to the writer, in one batch.

        A resumed run meets its stored cells in long stretches (a killed run stored the start of
        the plan): they are recorded a stretch at a time, before the next cells are sent, so
        the writer inserts them in one sorted pass (:func:`~evalhydra.store.inserts.insert_reused`)
        rather than scattered over many transactions. A process killed outright (``kill -9``)
        before a stretch is handed over leaves its run without those members; the cells stay
        stored, and the next run reuses them.
        """
        if self.reused:
            await self.rows.put(reused=self._take_reused())
            await trio.lowlevel.checkpoint()  # a long stretch of stored cells leaves the loop room to run

    def keep_reused(self) -> None:
        """Hand the reused cells recorded so far to the writer without waiting (the run was
        cancelled: the writer writes them as it ends, so an interrupted run holds every stored
        cell it met)."""
        if self.reused:
            self.rows.put_nowait(self._take_reused())

    def _take_reused(self) -> list[ReusedCells]:
        """The reused cells held, counted as skipped, and none held any more."""
        cells, self.reused = ReusedCells(self.run_id, self.reused, self.done), []
        self._count_skipped(len(cells.keys))
        return [cells]

    def _count_skipped(self, count: int) -> None:
        self.progress.skip(count)
        self.outcome.skipped += count
