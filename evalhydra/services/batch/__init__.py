"""Batch mode: chat cells answered through a provider's batch jobs (``service.batch``).

* :mod:`~evalhydra.services.batch.api`: the provider's Files and Batches API (OpenAI's ``/v1/files``
  and ``/v1/batches``), on httpx.
* :mod:`~evalhydra.services.batch.lines`: a batch's output and error files, read as untrusted input.
* :mod:`~evalhydra.services.batch.queue`: cells waiting on batch jobs: gathered into files,
  submitted, polled, matched back.
"""

from evalhydra.services.batch.queue import BatchDeferred
from evalhydra.services.batch.service import BatchingService, open_batching

__all__ = ["BatchDeferred", "BatchingService", "open_batching"]
