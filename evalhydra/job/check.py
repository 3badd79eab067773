"""``evalhydra check``: is every endpoint of a run there, and does it answer, before a long run?

For the run's chat service and each judge: ``GET /models`` (where the server lists models: is the
model among them?) and one minimal chat request (reachability, the key, the model, latency), sent
once, without retries, within the service's timeout. Exit 0 when every endpoint answered, 3
when one did not (a run could not measure).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import Any

import httpx
import trio
from tabulate import tabulate

from evalhydra.config.schema import RetryConfig, ServiceConfig
from evalhydra.core import strictjson
from evalhydra.core.values import ChatRequest, Completion
from evalhydra.execute.services import open_service
from evalhydra.job.exit_codes import ExitCode
from evalhydra.plan.model import RunPlan
from evalhydra.plan.preflight import check_services
from evalhydra.services.openai.secrets import read_env
from evalhydra.services.openai.service import OpenAICompatService

__all__ = ["EndpointCheck", "check_plan", "print_checks"]

#: What the check asks: a reply of a few tokens from any model.
PROBE = "Reply with exactly OK."


@dataclass(frozen=True)
class EndpointCheck:
    """What one endpoint answered.

    Attributes:
        service: The service's name.
        role: ``service`` or ``judge``.
        model: The model asked.
        endpoint: The chat-completions URL.
        listed: Whether ``GET /models`` lists the model (None: the server lists no models).
        status: The chat request's HTTP status (None: no reply).
        latency_ms: The chat request's latency.
        problem: What went wrong and the fix ("" when it answered).
    """

    service: str
    role: str
    model: str
    endpoint: str
    listed: bool | None
    status: int | None
    latency_ms: float
    problem: str

    @property
    def ok(self) -> bool:
        """The endpoint answered the chat request with a reply."""
        return not self.problem


def check_plan(plan: RunPlan) -> list[EndpointCheck]:
    """Check the plan's chat service (unless it is an agent CLI) and its judges.

    Raises:
        EvalHydraError: A service that cannot be called as configured (a header, a CA bundle).
    """
    check_services(plan)
    targets = [("service", plan.service, plan.model)] if plan.service.kind == "openai" else []
    targets += [("judge", cfg, cfg.model or cfg.default_model) for name, cfg in plan.judges.items()
                if name != plan.service.name and cfg.kind == "openai"]
    return trio.run(_check_all, plan, targets)


async def _check_all(plan: RunPlan, targets: list[tuple[str, ServiceConfig, str]]) -> list[EndpointCheck]:
    results = []
    async with trio.open_nursery() as nursery:
        for role, cfg, model in targets:
            results.append(await _check_one(plan, role, cfg, model, nursery))
        nursery.cancel_scope.cancel()  # the mocks started for the check
    return results


async def _check_one(plan: RunPlan, role: str, cfg: ServiceConfig, model: str,
                     nursery: trio.Nursery) -> EndpointCheck:
    once = replace(cfg, retry=RetryConfig(max_attempts=1), adaptive=False,
                   batch=replace(cfg.batch, enabled=False))
    service = await open_service(replace(plan, cache=None), once, nursery)
    assert isinstance(service, OpenAICompatService)  # no run id: never a batching wrapper
    try:
        api_root = service.base_url.rsplit("/chat/completions", 1)[0]
        listed = await _lists_model(api_root, service.api_headers(), model, cfg.timeout_ms / 1000)
        started = time.perf_counter()
        reply = await service.complete(ChatRequest(user_content=PROBE, model=model, params={"max_tokens": 8}))
        latency = (time.perf_counter() - started) * 1000
    finally:
        await service.aclose()
    where = "the built-in mock" if cfg.mock.enabled else service.base_url
    return EndpointCheck(cfg.name, role, model, where, listed, reply.status_code, latency,
                         _problem(cfg, model, listed, reply))


async def _lists_model(api_root: str, headers: dict[str, str], model: str, timeout_s: float) -> bool | None:
    """Whether ``GET /models`` lists ``model``; None when the server answers it with no list."""
    try:
        async with httpx.AsyncClient(headers=headers, timeout=min(timeout_s, 10.0)) as client:
            response = await client.get(f"{api_root}/models")
        if response.status_code != 200:
            return None
        data = strictjson.loads(response.text).get("data")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return any(isinstance(item, dict) and item.get("id") == model for item in data)


def _problem(cfg: ServiceConfig, model: str, listed: bool | None, reply: Completion) -> str:
    """What stops this endpoint, with the fix; "" when it answered."""
    if reply.error_kind is None:
        return ""
    status = reply.status_code
    detail = (reply.error_message or str(reply.error_kind.value)).splitlines()[0][:160]
    if status in (401, 403):
        key = cfg.api_key_env
        unset = key is not None and read_env(key) is None
        fix = f"export {key}=… (it is unset)" if unset else f"check the key in {key or 'service.api_key_env'}"
        return f"{status}: the endpoint refused the key: {fix}"
    if status == 404 and listed is False:
        return f"404: model '{model}' is not served here: pick one GET /models lists (service.model=NAME)"
    if status is None:
        return f"no reply: {detail}: is the server up at service.base_url?"
    return f"{status}: {detail}"


def print_checks(checks: list[EndpointCheck]) -> ExitCode:
    """Print one row per endpoint and a line per problem; return 0 when all answered, else 3."""
    if not checks:
        print("nothing to check: the service is an agent CLI and no judge is configured.")
        return ExitCode.OK
    rows = [[c.service, c.role, c.endpoint, c.model, _listed(c.listed), c.status or "—",
             f"{c.latency_ms:.0f}", "ok" if c.ok else "FAILED"] for c in checks]
    print(tabulate(rows, headers=["service", "role", "endpoint", "model", "in /models", "status", "ms",
                                  "check"]))
    for c in checks:
        if not c.ok:
            print(f"error: {c.service} ({c.endpoint}): {c.problem}", file=sys.stderr)
    return ExitCode.OK if all(c.ok for c in checks) else ExitCode.UNMEASURED


def _listed(value: bool | None) -> Any:
    return "—" if value is None else ("yes" if value else "no")
