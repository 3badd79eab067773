"""The SQLite store: every run, result and attempt; the one source of every report and resume.

* :mod:`~evalhydra.store.rows`: the typed result row and the rules that classify it.
* :mod:`~evalhydra.store.schema`: tables and numbered migrations, in order;
  :mod:`~evalhydra.store.views`: the views, made after any migration runs.
* :mod:`~evalhydra.store.db`: :class:`~evalhydra.store.db.Store` (batched writes, resume reads).
* :mod:`~evalhydra.store.merge`: exact merge of shard stores.
* :mod:`~evalhydra.store.batches`: the ``batches`` table: every batch job a run sent, so no rerun
  pays for it again.
* :mod:`~evalhydra.store.claims`: cell claims: one cell, one request, however many processes share a
  store.
* :mod:`~evalhydra.store.fractions`: per-case fractions of a finished run, saved beside its summary
  so comparisons skip its results.
* :mod:`~evalhydra.store.audits`: people's audits of simulated users (``simulator_audits``), keyed
  to the case and the transcript read.
* :mod:`~evalhydra.store.labels`: people's verdicts on stored outputs (``labels``), keyed to the
  case and the output judged.
* :mod:`~evalhydra.store.probes`: ``probes``, each check of ``evalhydra probe tools`` with its
  evidence.
* :mod:`~evalhydra.store.runinfo`: how a ``runs`` row reads to a person: its status, its partial
  selection, its wall time.
* :mod:`~evalhydra.store.sqlite_lib`: process-wide settings of the SQLite library: no memory
  statistics.
* :mod:`~evalhydra.store.timelimit`: a time limit on a connection's statements (query, merge,
  the viewer).
* :mod:`~evalhydra.store.connection`: opening the file (WAL, busy timeout, read-only URI,
  ``BEGIN IMMEDIATE``); :mod:`~evalhydra.store.inserts`: writing rows in few statement shapes.
"""

from evalhydra.store.db import Batch, Store, open_store
from evalhydra.store.rows import ResultRow
from evalhydra.store.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "Batch", "ResultRow", "Store", "open_store"]
