"""The checks that run just before the first call, after the plan is built.

:func:`~evalhydra.plan.build.build_plan` validates what the config says; these
check what sending needs (header values that can go on the wire, a transport
and its certificates) and warn about what will not stop a run (an unset API key
variable, a service limit that holds the run below ``run.concurrency``). A run
and a re-judge both call :func:`check_services`.
"""

from __future__ import annotations

import sys

from evalhydra.config.schema import RunConfig, ServiceConfig
from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.http.pool import TRANSPORTS, tls_context
from evalhydra.plan.model import RunPlan
from evalhydra.services.openai.secrets import check_header_values, missing_api_key_warning

__all__ = ["check_services"]


def check_services(plan: RunPlan) -> None:
    """Check every chat service of the plan (the candidate and its judges) can be called.

    Prints a warning per service whose ``api_key_env`` variable is unset (the mock
    and keyless local servers need none), and a note when the service's
    ``max_concurrency`` holds the run below a ``run.concurrency`` the user set.

    Raises:
        EvalHydraError: A header value that cannot be sent, an unknown transport, or an
            unreadable ``ca_bundle``.
    """
    services = {svc.name: svc for svc in [plan.service, *plan.judges.values()] if svc.kind == "openai"}
    for svc in services.values():
        check_header_values(svc)
        _check_transport(svc)
    chose = plan.run.concurrency != RunConfig().concurrency  # the user asked for it: say it is held back
    if chose and plan.service.kind == "openai" and plan.run.concurrency > plan.service.max_concurrency:
        print(f"note: run.concurrency={plan.run.concurrency}, but service '{plan.service.name}' sends at "
              f"most {plan.service.max_concurrency} requests at once (service.max_concurrency); raise it to "
              "send more.", file=sys.stderr)
    for svc in services.values():
        warning = missing_api_key_warning(svc)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)


def _check_transport(svc: ServiceConfig) -> None:
    """``service.transport`` names a transport, and ``service.ca_bundle`` (if set) holds CAs."""
    if svc.transport not in TRANSPORTS:
        raise EvalHydraError(f"service '{svc.name}': service.transport={svc.transport} is not a transport.",
                             did_you_mean(svc.transport, TRANSPORTS))
    tls_context(svc.verify, svc.ca_bundle)
