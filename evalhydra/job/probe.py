"""``evalhydra probe tools``: probe a run's service for tool-calling conformance, store the checks
and give the exit code (0 every check passed or n/a, 1 a check failed, 3 unreachable)."""

from __future__ import annotations

import sys
import uuid
from contextlib import closing
from dataclasses import replace

import trio

from evalhydra.core.masking import mask_text, mask_value
from evalhydra.execute.services import open_service
from evalhydra.job.exit_codes import ExitCode
from evalhydra.plan.model import RunPlan
from evalhydra.plan.preflight import check_services
from evalhydra.probe.run import ProbeReport, probe_endpoint
from evalhydra.services.openai.secrets import secrets_of
from evalhydra.services.openai.service import OpenAICompatService
from evalhydra.store.db import immediate, open_store
from evalhydra.store.probes import save_probe

__all__ = ["print_quick_probe", "probe_exit_code", "probe_plan", "store_probe"]


def probe_plan(plan: RunPlan, *, api: str = "chat", quick: bool = False) -> ProbeReport:
    """Probe the plan's chat service (the built-in mock started when it is enabled), secrets masked.

    Raises:
        EvalHydraError: A service that cannot be called as configured.
    """
    check_services(plan)
    return trio.run(_probe, plan, api, quick)


async def _probe(plan: RunPlan, api: str, quick: bool) -> ProbeReport:
    cfg = plan.service
    async with trio.open_nursery() as nursery:
        service = await open_service(replace(plan, cache=None), cfg, nursery)
        assert isinstance(service, OpenAICompatService)  # no run id: never a batching wrapper
        try:
            root = service.base_url.rsplit("/chat/completions", 1)[0]
            shown = "the built-in mock" if cfg.mock.enabled else root
            report = await probe_endpoint(root, service.api_headers(), plan.model, service=cfg.name, api=api,
                                          quick=quick, endpoint=shown)
        finally:
            await service.aclose()
        nursery.cancel_scope.cancel()  # the mock started for the probe
    return _masked(report, secrets_of([cfg]))


def _masked(report: ProbeReport, secrets: list[str]) -> ProbeReport:
    """The report with every secret masked in its endpoint, details and evidence."""
    if not secrets:
        return report
    report.endpoint = mask_text(report.endpoint, secrets) or ""
    report.verdicts = [(c, replace(v, detail=mask_text(v.detail, secrets) or "",
                                   evidence=mask_value(v.evidence, secrets))) for c, v in report.verdicts]
    return report


def store_probe(store_path: str, report: ProbeReport) -> str:
    """Store the report's checks as one probe; returns its id."""
    probe_id = f"probe-{uuid.uuid4().hex[:8]}"
    target = {"service": report.service, "model": report.model, "endpoint": report.endpoint,
              "api": report.api}
    with closing(open_store(store_path)) as store, immediate(store.conn):
        save_probe(store.conn, probe_id, target,
                   [(c.id, v.status, v.detail, v.evidence) for c, v in report.verdicts])
    return probe_id


def probe_exit_code(report: ProbeReport) -> int:
    """3 unreachable, 1 a check failed, else 0."""
    if report.unreachable:
        return ExitCode.UNMEASURED
    return ExitCode.GATE if report.failed else ExitCode.OK


def print_quick_probe(plan: RunPlan) -> None:
    """``evalhydra check``'s part for tool loops: the probe's quick subset against the run's service
    (when an eval of the plan runs a tool loop on it), a line per check, a warning per failure."""
    if plan.service.kind != "openai" or not any(ev.loop is not None for ev in plan.evals):
        return
    report = probe_plan(plan, quick=True)
    if report.unreachable:
        return  # the endpoint check above says so
    counts = report.counts()
    print(f"\ntool calling (quick probe of '{report.service}'): {counts['pass']} passed, "
          f"{counts['fail']} failed, {counts['n/a']} not applicable")
    for check, verdict in report.failed:
        print(f"warning: {report.service}: {check.id}: {verdict.detail}; the full probe: "
              f"evalhydra probe tools service={report.service}", file=sys.stderr)
