"""A new run's identity and its ``runs`` row: its id, the config it ran with (secrets redacted),
where and by which process it runs, and the judges' settings per eval."""

from __future__ import annotations

import json
import os
import socket
import uuid
from typing import Any

from evalhydra.config.redact import redact_overrides
from evalhydra.core.version import __version__
from evalhydra.matchers.factory import judge_settings
from evalhydra.plan.model import RunPlan
from evalhydra.store.rows import now_iso

__all__ = ["new_run_id", "run_row"]


def new_run_id(plan: RunPlan, prefix: str = "eval") -> str:
    """``<prefix>-<slug>-<8 hex>`` (the aiwg run_id pattern)."""
    name = plan.evals[0].group if len({e.group for e in plan.evals}) == 1 else "suite"
    slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") or "run"
    return f"{prefix}-{slug}-{uuid.uuid4().hex[:8]}"


def run_row(plan: RunPlan, run_id: str, total: int) -> dict[str, Any]:
    """The ``runs`` row of a new invocation (config already redacted)."""
    return {
        "run_id": run_id,
        "kind": "agent" if plan.service.kind == "command" else "chat",
        "started_at": now_iso(),
        "status": "running",
        "overrides": redact_overrides(plan.overrides),
        "config": plan.config,
        "fingerprint": plan.fingerprint,
        "version": __version__,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "cells_total": total,
        "sweep_dir": plan.sweep_dir,
        "job_num": plan.job_num,
        "parent_run_id": None,
        "judges": json.dumps({e.id: found for e in plan.evals if (found := judge_settings(e.matcher))}),
    }
