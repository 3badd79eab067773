"""``evalhydra check``: is every endpoint of a run there, and does it answer, before a long run?

For the run's chat service and each judge: ``GET /models`` (where the server lists models: is the
model among them? if not, which are?) and one minimal chat request (reachability, the key, the
model, latency), sent once, without retries, within the service's timeout. Each MCP server a tool
loop names is started as a cell starts it, and its tools listed. Exit 0 when everything answered,
3 when something did not (a run could not measure).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx
import trio
from tabulate import tabulate

from evalhydra.config.schema import RetryConfig, ServiceConfig
from evalhydra.core import strictjson
from evalhydra.core.envfiles import env_source
from evalhydra.core.values import ChatRequest, Completion
from evalhydra.execute.mcp_tools import McpUnavailable, open_mcp
from evalhydra.execute.services import open_service
from evalhydra.job.exit_codes import ExitCode
from evalhydra.plan.model import RunPlan
from evalhydra.plan.preflight import check_services
from evalhydra.plan.tools import McpServerPlan
from evalhydra.services.openai.secrets import read_env
from evalhydra.services.openai.service import OpenAICompatService

__all__ = ["EndpointCheck", "McpCheck", "check_mcp", "check_plan", "print_checks"]

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


@dataclass(frozen=True)
class McpCheck:
    """What one MCP server an eval names did when started as a cell starts it.

    Attributes:
        eval_id: The (first) eval naming it.
        server: Its name.
        tools: The tools it offered, as the model sees them.
        problem: Why it did not start or list its tools, with the fix ("" when it did).
    """

    eval_id: str
    server: str
    tools: tuple[str, ...]
    problem: str


def check_mcp(plan: RunPlan) -> list[McpCheck]:
    """Start each MCP server the plan's tool loops name (once each), list its tools, and stop it."""
    servers: dict[McpServerPlan, str] = {}
    for ev in plan.evals:
        for server in ev.loop.mcp if ev.loop is not None else ():
            servers.setdefault(server, ev.id)
    return trio.run(_check_servers, servers) if servers else []


async def _check_servers(servers: dict[McpServerPlan, str]) -> list[McpCheck]:
    results = []
    for server, eval_id in servers.items():
        try:
            async with open_mcp((server,), set(), trio.CapacityLimiter(1)) as tools:
                offered = tuple(spec.name for spec in tools.specs)
        except McpUnavailable as exc:
            results.append(McpCheck(eval_id, server.name, (), str(exc)))
        else:
            results.append(McpCheck(eval_id, server.name, offered, ""))
    return results


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
        served = await _served_models(api_root, service.api_headers(), cfg.timeout_ms / 1000)
        started = time.perf_counter()
        reply = await service.complete(ChatRequest(user_content=PROBE, model=model, params={"max_tokens": 8}))
        latency = (time.perf_counter() - started) * 1000
    finally:
        await service.aclose()
    where = "the built-in mock" if cfg.mock.enabled else service.base_url
    listed = None if served is None else model in served
    origin = plan.url_origin if role == "service" and not cfg.mock.enabled else ""
    return EndpointCheck(cfg.name, role, model, where, listed, reply.status_code, latency,
                         _problem(cfg, model, served, reply, origin))


async def _served_models(api_root: str, headers: dict[str, str], timeout_s: float) -> list[str] | None:
    """The model ids ``GET /models`` lists; None when the server answers it with no list."""
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
    return [str(item["id"]) for item in data if isinstance(item, dict) and isinstance(item.get("id"), str)]


def _problem(cfg: ServiceConfig, model: str, served: list[str] | None, reply: Completion,
             origin: str = "") -> str:
    """What stops this endpoint, with the fix; "" when it answered. ``origin``: where the URL
    came from (:attr:`~evalhydra.plan.model.RunPlan.url_origin`)."""
    if reply.error_kind is None:
        return ""
    status = reply.status_code
    detail = (reply.error_message or str(reply.error_kind.value)).splitlines()[0][:160]
    url = f" (the URL is {origin})" if origin else ""
    if status in (401, 403):
        return f"{status}: the endpoint refused the key: {_key_fix(cfg.api_key_env)}"
    if status == 404 and served is not None and model not in served:
        shown = ", ".join(served[:MODELS_SHOWN]) + (f" and {len(served) - MODELS_SHOWN} more"
                                                     if len(served) > MODELS_SHOWN else "")
        return (f"404: model '{model}' is not served here; it serves {shown or 'no model'}:"
                f" set service.model=NAME")
    if status == 404 and cfg.api == "responses":
        return (f"404: the server has no /v1/responses{url}; most OpenAI-compatible servers serve"
                " /v1/chat/completions only: set service.api=chat")
    if status == 404:
        return f"404: {detail}: is service.base_url the API's root (…/v1){url}?"
    if status is None:
        return f"no reply: {detail}: is the server up at service.base_url{url}?"
    return f"{status}: {detail}"


#: Served models named in a wrong model's fix line.
MODELS_SHOWN = 10


def _key_fix(key: str | None) -> str:
    """How to fix a refused key, saying where the key came from."""
    if key is None:
        return "set service.api_key_env to the variable holding the key"
    if read_env(key) is None:
        return f"export {key}=… or add it to the project's .env (it is unset)"
    return f"check the key in {key} (from {env_source(key)})"


def print_checks(checks: list[EndpointCheck], servers: Sequence[McpCheck] = ()) -> ExitCode:
    """Print one row per endpoint and per MCP server, and a line per problem; return 0 when all
    answered, else 3."""
    if not checks and not servers:
        print("nothing to check: the service is an agent CLI and no judge is configured.")
        return ExitCode.OK
    if checks:
        rows = [[c.service, c.role, c.endpoint, c.model, _listed(c.listed), c.status or "—",
                 f"{c.latency_ms:.0f}", "ok" if c.ok else "FAILED"] for c in checks]
        print(tabulate(rows, headers=["service", "role", "endpoint", "model", "in /models", "status", "ms",
                                      "check"]))
    if servers:
        print("\n" if checks else "", end="")
        print(tabulate([[m.server, m.eval_id, ", ".join(m.tools) or "—", "FAILED" if m.problem else "ok"]
                        for m in servers], headers=["mcp server", "eval", "tools", "check"]))
    for c in checks:
        if not c.ok:
            print(f"error: {c.service} ({c.endpoint}): {c.problem}", file=sys.stderr)
    for m in servers:
        if m.problem:
            print(f"error: {m.problem}", file=sys.stderr)
    ok = all(c.ok for c in checks) and not any(m.problem for m in servers)
    return ExitCode.OK if ok else ExitCode.UNMEASURED


def _listed(value: bool | None) -> Any:
    return "—" if value is None else ("yes" if value else "no")
