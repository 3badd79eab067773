"""How often the cyclic garbage collector runs while a run's cells are in flight.

Python collects its youngest generation whenever the tracked objects made exceed
those freed by 700. A cell makes and frees hundreds (coroutine frames, httpx's
request and response, the reply's parsed JSON, the result row), and the few
hundred cells in flight keep theirs alive across each collection, so every one
of those collections walks them and moves them up a generation to be walked
again: a measurable share of a cell's CPU (``bench/throughput.py``; the figures
are in docs/performance.md). With the youngest generation collected every 10,000
net allocations instead, a run makes only a few collections. Cyclic garbage
waits a little longer for its collection; everything else is freed by reference
counting as before.

:class:`RunGcPace` sets that threshold for the time a run executes and puts back
the caller's when the last run of the process ends (runs may overlap in one
process: an API caller's threads), then collects the cyclic garbage of the run
(and of whatever ran before it), so its finalisers run at the run's end and not
inside whatever the caller does next. In the test suite an unclosed loopback
socket in such garbage would otherwise fail, at random, a later test's setup on a
``ResourceWarning``. The collection walks only what the run made when start-up's
objects are frozen (:func:`evalhydra.cli.startup.resume_gc`), so it is short.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType

__all__ = ["RUN_GEN0_THRESHOLD", "RunGcPace"]

#: Net allocations between two collections of the youngest generation during a run (Python: 700).
RUN_GEN0_THRESHOLD = 10_000


class RunGcPace:
    """``with RunGcPace():`` collects the youngest generation at most every
    :data:`RUN_GEN0_THRESHOLD` net allocations until the last overlapping run ends."""

    _lock = threading.Lock()
    _runs = 0
    _saved: tuple[int, int, int] = (0, 0, 0)

    def __enter__(self) -> None:
        cls = type(self)
        with cls._lock:
            if cls._runs == 0:
                cls._saved = gc.get_threshold()
                young, *older = cls._saved
                if young:  # 0: the caller turned automatic collection off; leave it off
                    gc.set_threshold(max(young, RUN_GEN0_THRESHOLD), *older)
            cls._runs += 1

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        cls = type(self)
        with cls._lock:
            cls._runs -= 1
            last = cls._runs == 0
            if last:
                gc.set_threshold(*cls._saved)
        if last:  # outside the lock: finalisers run during a collection and may start a run
            gc.collect()  # the runs' cyclic garbage, now, not at some later caller's allocation
