"""Opening a run's services: the candidate, its judges, and mock servers for them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import trio

from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import NO_CELL, CallContext, ChatRequest, Completion, ErrorKind
from evalhydra.matchers.base import Matcher
from evalhydra.matchers.factory import build_matcher
from evalhydra.plan.model import RunPlan
from evalhydra.services.adaptive import Endpoints
from evalhydra.services.base import Embedder, EndpointReport, Reporting, Service
from evalhydra.services.batch import open_batching
from evalhydra.services.cache import ResponseCache
from evalhydra.services.mock.server import serve
from evalhydra.services.mock.settings import MockSettings
from evalhydra.services.openai import OpenAICompatService
from evalhydra.services.recorded import RecordedService

__all__ = ["JudgeServices", "build_matchers", "open_service", "open_services"]


class JudgeServices:
    """The run's open services by name: the JudgeClient handed to judge matchers, and what the run
    asks of its services' endpoints and batches (:meth:`status`, :meth:`refused`)."""

    def __init__(self, services: dict[str, Service], *, cached: bool = True,
                 endpoints: Endpoints | None = None) -> None:
        self.services = services
        self.cached = cached  # cache.judge: False keeps judge calls out of the response cache
        self.endpoints = endpoints if endpoints is not None else Endpoints()

    def status(self) -> str:
        """The progress line's note: each service's, every part once."""
        parts = (part for service in self.services.values() if isinstance(service, Reporting)
                 for part in service.status().split(" · ") if part)
        return " · ".join(dict.fromkeys(parts))

    def refused(self) -> list[EndpointReport]:
        """The run's endpoints that refused requests (429), for the summary."""
        return self.endpoints.refused()

    def service_names(self) -> list[str]:
        """Names of the judge services that can be called."""
        return sorted(self.services)

    async def embed(self, service_name: str, model: str,
                    texts: list[str]) -> tuple[list[list[float]] | None, Completion]:
        """Embed ``texts`` with the named service's embeddings endpoint (an HTTP service's only)."""
        service = self.services[service_name]
        if not isinstance(service, Embedder):
            return None, Completion(output="", model=model, error_kind=ErrorKind.CLIENT_ERROR,
                                    error_message=f"service '{service_name}' has no embeddings endpoint")
        return await service.embed(model, texts)

    async def judge(self, service_name: str, request: ChatRequest,
                    context: CallContext = NO_CELL) -> Completion:
        """Send a judge request to the named service, for ``context``'s cell (out of the response
        cache unless ``cache.judge``)."""
        return await self.services[service_name].complete(
            request, context if self.cached else replace(context, use_cache=False))


def build_matchers(plan: RunPlan, judges: JudgeServices) -> dict[str, Matcher]:
    """One matcher per eval of the plan, keyed by eval id."""
    return {
        ev.id: build_matcher(ev.matcher, registry_root=plan.registry_root, judges=judges,
                             where=f"eval '{ev.id}': matcher")
        for ev in plan.evals
    }


@asynccontextmanager
async def open_services(
    plan: RunPlan, nursery: trio.Nursery, *, candidate: bool = True, run_id: str | None = None
) -> AsyncIterator[tuple[Service | None, JudgeServices]]:
    """Open the run's HTTP service (unless ``candidate`` is False or it is an agent CLI)
    and its judges, starting mock servers in ``nursery`` as needed. With ``run_id`` (a run
    of the plan's own cells) services in batch mode, or with batches left open in the store,
    answer through batch jobs."""
    opened: dict[str, Service] = {}
    endpoints = Endpoints()  # one controller per URL, shared by the run's services
    try:
        main = None
        if candidate and plan.service.kind != "command":
            main = await open_service(plan, plan.service, nursery, run_id, endpoints)
            opened[plan.service.name] = main
        for name, cfg in plan.judges.items():
            if name not in opened:
                opened[name] = await open_service(plan, cfg, nursery, run_id, endpoints)
        yield main, JudgeServices(opened, cached=plan.cache is None or plan.cache.judge, endpoints=endpoints)
    finally:
        with trio.CancelScope(shield=True):
            for service in opened.values():
                await service.aclose()


async def open_service(plan: RunPlan, cfg: ServiceConfig, nursery: trio.Nursery,
                       run_id: str | None = None, endpoints: Endpoints | None = None) -> Service:
    """Open one HTTP service, starting its mock server in ``nursery`` when enabled (and its batch
    queue, see :func:`open_services`)."""
    if cfg.kind == "recorded":  # nothing to send: the cases' samples are the answers
        return RecordedService(cfg)
    base_url = None
    if cfg.mock.enabled:
        handle = await nursery.start(serve, MockSettings.from_config(cfg.mock))
        base_url = str(handle.url)
    cache = plan.cache
    judge_only = cfg is not plan.service
    use_cache = cache is not None and (cache.judge or not judge_only)
    responses = ResponseCache(cache.path, cache.expiry_s) if use_cache and cache is not None else None
    service = OpenAICompatService(cfg, registry_root=plan.registry_root, base_url=base_url, cache=responses,
                                  endpoints=endpoints)
    if run_id is None:
        return service
    try:
        return await open_batching(service, store_path=plan.store_path, run_id=run_id, nursery=nursery,
                                   max_cost_usd=plan.run.max_cost_usd)
    except BaseException:
        with trio.CancelScope(shield=True):
            await service.aclose()
        raise
