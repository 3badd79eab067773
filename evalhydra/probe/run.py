"""Probe one endpoint: send the probes (at most a few at a time, within a deadline), read them,
and return every check's verdict; the probe itself never raises for what the server does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio

from evalhydra.probe.catalog import PROBES, QUICK, chat_body
from evalhydra.probe.checks import CHAT_CHECKS, FAIL, Check, Verdict, run_checks
from evalhydra.probe.exchange import Exchange, send
from evalhydra.probe.stream_checks import STREAM_CHECKS
from evalhydra.probe.turns import RESPONSES_CHECKS, TURN_CHECKS, chat_turns, responses_turns

__all__ = ["ProbeReport", "probe_endpoint", "quick_checks"]

#: The checks the quick subset (``evalhydra check``) can answer from its four probes.
_QUICK_CHECKS = ("single_call", "finish_reason", "no_markup_in_content", "call_ids_present", "parallel_calls",
                 "call_ids_unique", "stream_complete", "stream_first_delta", "stream_index_present",
                 "stream_index_distinct", "stream_name_once", "stream_final_delta", "stream_utf8",
                 "stream_equals_whole")
#: Probes in flight at once: a probe is a handful of requests, not a load test.
_IN_FLIGHT = 4


@dataclass
class ProbeReport:
    """What a probe found.

    Attributes:
        service: The service's name.
        model: The model probed.
        endpoint: The URL probed (the mock's own when it was the built-in mock).
        api: ``chat`` or ``responses``.
        verdicts: Each check and its verdict, in the checks' order.
        exchanges: Every probe sent, by name (their raw replies are the evidence).
        unreachable: Why the endpoint could not be probed at all ("" when it could).
        seconds: How long the probe took.
    """

    service: str
    model: str
    endpoint: str
    api: str
    verdicts: list[tuple[Check, Verdict]] = field(default_factory=list)
    exchanges: dict[str, Exchange] = field(default_factory=dict)
    unreachable: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> list[tuple[Check, Verdict]]:
        """The checks that failed."""
        return [(c, v) for c, v in self.verdicts if v.status == FAIL]

    def counts(self) -> dict[str, int]:
        """How many checks passed, failed and were not applicable."""
        found = {"pass": 0, "fail": 0, "n/a": 0}
        for _, verdict in self.verdicts:
            found[verdict.status] += 1
        return found


async def probe_endpoint(base_url: str, headers: dict[str, str], model: str, *, service: str = "",
                         api: str = "chat", quick: bool = False, timeout_s: float = 60.0,
                         endpoint: str | None = None) -> ProbeReport:
    """Probe an OpenAI-compatible API root (``…/v1``).

    Args:
        base_url: The API root; probes go to ``/chat/completions`` or ``/responses`` under it.
        headers: Headers for every request (the key).
        model: The model to ask.
        service: The service's name, as reported.
        api: ``chat`` (chat completions) or ``responses`` (the Responses API).
        quick: Only the quick subset (single and parallel calls, whole and streamed).
        timeout_s: The whole probe's deadline; probes left are reported as not answered.
        endpoint: The URL to report (default: the one probed).
    """
    path = "/responses" if api == "responses" else "/chat/completions"
    url = base_url.rstrip("/") + path
    report = ProbeReport(service, model, endpoint or url, api)
    started = time.perf_counter()
    async with httpx.AsyncClient(headers=headers, timeout=min(timeout_s, 30.0)) as client:
        with trio.move_on_after(timeout_s):
            report.exchanges = await (_responses(client, url, model) if api == "responses"
                                      else _chat(client, url, model, quick))
    report.seconds = time.perf_counter() - started
    report.unreachable = _unreachable(report.exchanges)
    if not report.unreachable:
        report.verdicts = run_checks(_checks(api, quick), report.exchanges)
    return report


def quick_checks() -> tuple[str, ...]:
    """The ids of the checks the quick subset runs."""
    return _QUICK_CHECKS


def _checks(api: str, quick: bool) -> tuple[Check, ...]:
    if api == "responses":
        return RESPONSES_CHECKS
    every = (*CHAT_CHECKS, *STREAM_CHECKS, *TURN_CHECKS)
    return tuple(c for c in every if c.id in _QUICK_CHECKS) if quick else every


async def _chat(client: httpx.AsyncClient, url: str, model: str, quick: bool) -> dict[str, Exchange]:
    names = QUICK if quick else tuple(PROBES)
    found: dict[str, Exchange] = {}
    limiter = trio.CapacityLimiter(_IN_FLIGHT)

    async def one(name: str) -> None:
        async with limiter:
            found[name] = await send(client, url, name, chat_body(model, name), model)

    async with trio.open_nursery() as nursery:
        for name in names:
            nursery.start_soon(one, name)
        if not quick:
            async def turns() -> None:
                async with limiter:
                    found.update(await chat_turns(client, url, model))
            nursery.start_soon(turns)
    return found


async def _responses(client: httpx.AsyncClient, url: str, model: str) -> dict[str, Exchange]:
    return await responses_turns(client, url, model)


def _unreachable(exchanges: dict[str, Any]) -> str:
    """Why no probe got a reply at all (no connection, or every request refused as unauthorised)."""
    if not exchanges:
        return "no probe was answered before the deadline"
    statuses = {e.status for e in exchanges.values()}
    if statuses == {None}:
        return next(iter(exchanges.values())).error or "no reply"
    if statuses <= {401, 403}:
        return f"the endpoint refused the key ({sorted(s for s in statuses if s)[0]})"
    if statuses == {404}:
        return "the endpoint answered 404: is the URL the API root (…/v1)?"
    return ""
