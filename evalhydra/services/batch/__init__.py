"""Batch mode: chat cells answered through a provider's batch jobs (``service.batch``).

* :mod:`~evalhydra.services.batch.api`: the provider's Files and Batches API (OpenAI's ``/v1/files``
  and ``/v1/batches``), on httpx.
* :mod:`~evalhydra.services.batch.lines`: a batch's output and error files, read as untrusted input.
* :mod:`~evalhydra.services.batch.outcomes`: what a batch gives each request: its input line, its
  answer or error, or a deferral.
* :mod:`~evalhydra.services.batch.queue`: cells waiting on batch jobs: gathered into files,
  submitted, polled, matched back.
* :mod:`~evalhydra.services.batch.service`: the batching service: a service whose chat cells wait
  on the queue.
"""

from evalhydra.services.batch.outcomes import BatchDeferred
from evalhydra.services.batch.service import BatchingService, open_batching

__all__ = ["BatchDeferred", "BatchingService", "open_batching"]
