"""The SQLite store: every run, result and attempt; the one source of every report and resume.

* :mod:`~evalhydra.store.rows`: the typed result row and the rules that classify it.
* :mod:`~evalhydra.store.schema`: tables, views and numbered migrations.
* :mod:`~evalhydra.store.db`: :class:`~evalhydra.store.db.Store` (batched writes, resume reads).
* :mod:`~evalhydra.store.merge`: exact merge of shard stores.
"""

from evalhydra.store.db import Batch, Store, open_store
from evalhydra.store.rows import ResultRow
from evalhydra.store.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "Batch", "ResultRow", "Store", "open_store"]
