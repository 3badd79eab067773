"""Batch mode as a :class:`~evalhydra.services.base.Service`: a cell's request waits on a batch job.

:class:`BatchingService` wraps the chat service. A request made for a cell (its
:class:`~evalhydra.core.values.CallContext` names it) becomes a batch line whose ``custom_id`` is the
cell key (a cell's later calls, its judge's or a refinement's, are ``KEY#1``, ``KEY#2`` …
in the order the cell makes them, the same on every rerun); its answer is read
as the online reply would be, priced at ``pricing.batch_discount``. Requests made
outside a cell (a re-judge) and, with ``batch.enabled=false``, every request
that no adopted batch holds, go online.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import NO_CELL, AttemptRecord, CallContext, ChatRequest, Completion, ErrorKind
from evalhydra.services.base import EndpointReport
from evalhydra.services.batch.api import BatchApi, api_base
from evalhydra.services.batch.outcomes import BatchDeferred, LineOutcome, estimate_line_usd
from evalhydra.services.batch.queue import BatchQueue
from evalhydra.services.openai import OpenAICompatService
from evalhydra.services.openai.response import InvalidResponseError
from evalhydra.services.pricing import cost_usd
from evalhydra.store.batches import BatchLedger

__all__ = ["BatchingService", "open_batching"]


class BatchingService:
    """A chat service whose cells are answered through batch jobs.

    Args:
        inner: The online service (its body encoding, reply parsing, key and secrets).
        queue: The service's batch queue, already running.
        online: Cell keys sent online rather than in a batch (``batch.fallback=online``).
    """

    def __init__(self, inner: OpenAICompatService, queue: BatchQueue,
                 online: frozenset[str] = frozenset()) -> None:
        self.inner = inner
        self.queue = queue
        self.config: ServiceConfig = inner.config
        self._online = online

    @property
    def name(self) -> str:
        """The service's name."""
        return self.inner.name

    def status(self) -> str:
        """What its batch queue holds, and its endpoints' limits, for the progress line."""
        return " · ".join(part for part in (self.inner.status(), self.queue.status()) if part)

    def refused(self) -> list[EndpointReport]:
        """Its endpoints that refused requests (429), for the summary."""
        return self.inner.refused()

    async def embed(self, model: str, texts: list[str]) -> tuple[list[list[float]] | None, Completion]:
        """Embeddings go online: the Batch API's lines here are chat completions only."""
        return await self.inner.embed(model, texts)

    async def complete(self, request: ChatRequest, context: CallContext = NO_CELL) -> Completion:
        """The request's batch line (named after ``context``'s cell) as a completion (online when it
        is not a batch's).

        Raises:
            BatchDeferred: The line's batch is still pending at the provider (or was held back
                by ``run.max_cost_usd``): the cell must not be stored.
        """
        custom_id = context.custom_id()
        if custom_id is None or not self._batched(custom_id):
            return await self.inner.complete(request, context)
        encoded = self.inner.encode(request)
        if isinstance(encoded, Completion):
            return encoded
        model, body = encoded
        outcome = await self.queue.answer(custom_id, body)
        if outcome.deferred:
            raise BatchDeferred(outcome.message or "deferred", budget=outcome.budget)
        return self._completion(outcome, model)

    def _batched(self, custom_id: str) -> bool:
        if self.queue.adopts(custom_id):
            return True
        return self.queue.enabled and custom_id.partition("#")[0] not in self._online

    def _completion(self, outcome: LineOutcome, model: str) -> Completion:
        """A batch line read as the online reply would be, at the batch price."""
        if outcome.error_kind is not None or outcome.body is None:
            return _failed(outcome, model, outcome.error_kind, outcome.message)
        try:
            answer = self.inner.parse_answer(outcome.body, model)
        except InvalidResponseError as exc:
            return _failed(outcome, model, ErrorKind.INVALID_RESPONSE, str(exc.args[0]))
        online = cost_usd(answer.usage, self.config.pricing)
        paid = online * self.config.pricing.batch_discount
        attempt = AttemptRecord(1, outcome.status_code, None, outcome.latency_ms)
        return Completion(output=answer.output, model=answer.model, tool_calls=answer.tool_calls,
                          usage=answer.usage, status_code=200, latency_ms=outcome.latency_ms,
                          attempts=(attempt,), cost_usd=paid, reasoning=answer.reasoning,
                          reasoning_finished=answer.reasoning_finished, saved_usd=online - paid, batched=True)

    async def aclose(self) -> None:
        """Close the online service, the batch API's connections and the ledger."""
        try:
            await self.queue.stop()
            await self.inner.aclose()
            await self.queue.api.aclose()
        finally:
            self.queue.ledger.close()


def _failed(outcome: LineOutcome, model: str, kind: ErrorKind | None, message: str | None) -> Completion:
    """A batch line that is no answer: an infrastructure error of the cell."""
    attempt = AttemptRecord(1, outcome.status_code, kind, outcome.latency_ms, message)
    return Completion(output="", model=model, status_code=outcome.status_code, latency_ms=outcome.latency_ms,
                      error_kind=kind, error_message=message, attempts=(attempt,), batched=True)


async def open_batching(inner: OpenAICompatService, *, store_path: Path, run_id: str, nursery: trio.Nursery,
                        max_cost_usd: float | None = None) -> OpenAICompatService | BatchingService:
    """The service a run sends through: ``inner`` itself, or a :class:`BatchingService` when
    ``service.batch.enabled`` or when the store holds batches an earlier run left open for it
    (those are collected even with batch mode off).

    Args:
        inner: The opened online service.
        store_path: The run's store (its ``batches`` table).
        run_id: The run that submits.
        nursery: Where the batch queue's task runs (the run's helper nursery).
        max_cost_usd: ``run.max_cost_usd``: no batch is submitted past it (by its estimate).
    """
    config = inner.config
    ledger = BatchLedger(store_path)
    try:
        await trio.to_thread.run_sync(ledger.close_stored)
        adopted = await trio.to_thread.run_sync(ledger.open_batches, [config.name])
        if not adopted and not config.batch.enabled:
            ledger.close()
            return inner
        online: frozenset[str] = frozenset()
        if config.batch.fallback == "online":
            online = await trio.to_thread.run_sync(ledger.failed_cells, config.name)
    except BaseException:
        ledger.close()
        raise
    base = api_base(inner.base_url)
    pricing = config.pricing
    queue = BatchQueue(
        BatchApi(base, inner.api_headers()), ledger, config.batch, service=config.name,
        endpoint="evalhydra-mock" if config.mock.enabled else str(httpx.URL(base).copy_with(userinfo=b"")),
        run_id=run_id, api_key_env=config.api_key_env, adopted=adopted,
        price_line=lambda body: estimate_line_usd(body, pricing.input_per_mtok,
                                                  pricing.output_per_mtok) * pricing.batch_discount,
        budget_usd=max_cost_usd, mask=inner.mask,
        url_path="/v1/responses" if config.api == "responses" else "/v1/chat/completions")
    await nursery.start(queue.run)
    return BatchingService(inner, queue, online)
