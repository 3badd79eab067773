"""Batch mode: chat cells answered through a provider's batch jobs (``service.batch``)."""

from evalhydra.services.batch.queue import BatchDeferred
from evalhydra.services.batch.service import BatchingService, batch_status, open_batching, start_cell

__all__ = ["BatchDeferred", "BatchingService", "batch_status", "open_batching", "start_cell"]
