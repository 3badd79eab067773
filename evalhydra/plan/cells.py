"""The cells of a plan: their resume keys and their enumeration.

A cell is one (eval, case, service, model, trial). Its key hashes everything
that determines its result, so a rerun skips exactly the cells already stored.
The key recipe is part of the store format: changing it would make every
existing store re-run from scratch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from evalhydra.agents.loader import load_cases
from evalhydra.config.schema import ServiceConfig
from evalhydra.core.values import immutable
from evalhydra.plan.model import EvalPlan, RunPlan
from evalhydra.registry.datasets import iter_cases

__all__ = [
    "CellJob",
    "cell_key",
    "count_cells",
    "digest",
    "endpoint_of",
    "iter_plan_cases",
    "planned_cells",
    "service_result_hash",
    "shard_of",
]


@immutable
class CellJob:
    """One cell to execute."""

    key: str
    eval: EvalPlan
    case: Any  # Case for chat evals, AgentCase for agent evals
    trial: int
    model: str = ""  # the cell's model when the run has several (agent CLIs), else the plan's
    parent: Any = None  # re-judging: the stored result scored again (execute.rejudge_cell.StoredResult)


def digest(value: Any) -> str:
    """A short stable hash of a JSON-able value (keys sorted)."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def service_result_hash(service: ServiceConfig) -> str:
    """Hash of the service settings that change results: what is asked and where it is sent
    (not timeouts, limits or keys).

    The endpoint joins the hash only for a real endpoint, so cells of the built-in mock
    keep the keys they had before the endpoint was part of a cell's identity.
    """
    parts: list[Any] = [
        service.system_prompt,
        dict(service.params),
        service.provider,
        service.kind,
        service.template,
        list(service.argv or []),
    ]
    endpoint = endpoint_of(service)
    if endpoint:
        parts.append(endpoint)
    # Later additions join only when they differ from their default, so the keys of cells
    # stored before them stay the same.
    later = (("honor_verification_marker", service.honor_verification_marker, True),
             ("env_prefix", service.env_prefix, "ZRB"), ("mock.fixed_reply", service.mock.fixed_reply, None),
             ("reasoning.parse", service.reasoning.parse, True),
             ("reasoning.tags", list(service.reasoning.tags), ["<think>", "</think>"]),
             ("stream", service.stream, False), ("mock.reasoning", service.mock.reasoning, None),
             ("api", service.api, "chat"),  # the Responses API is another request to another endpoint
             ("revision", service.revision, None))
    parts += [[name, value] for name, value, default in later if value != default]
    return digest(parts)


#: How every ``ServiceConfig`` field bears on a cell's identity (``tests/config`` checks the sets
#: cover every field, so a new one must be placed): hashed by :func:`service_result_hash`; part
#: of the cell key itself (the service name and the cell's model); the agent CLI a service name
#: stands for (another CLI is another service); or unable to change a scored result.
RESULT_FIELDS_HASHED = frozenset({"system_prompt", "params", "provider", "kind", "template", "argv",
                                  "base_url", "honor_verification_marker", "env_prefix", "mock",
                                  "reasoning", "stream", "api", "revision"})
RESULT_FIELDS_IN_KEY = frozenset({"name", "default_model", "model", "models"})
NAMED_BY_THE_SERVICE = frozenset({"cli_name"})
NOT_RESULT_FIELDS = frozenset({
    "timeout_ms", "deadline_ms", "timeout_s",  # only whether an error happens (errors are re-sent)
    "api_key_env", "headers",  # credentials, never hashed (a hash of a secret could be guessed)
    "retry", "max_concurrency", "rate_limit", "transport", "proxy", "verify", "ca_bundle", "pricing",
    "adaptive", "rate_limit_timeout_s",
    "batch",  # a cell answered in a batch is the same cell as one answered online
    "record_wire"})  # what is kept of the reply, not what the reply is


def endpoint_of(service: ServiceConfig) -> str:
    """Where a chat service's requests go: its ``base_url`` (without trailing slashes), or
    "" for the built-in mock and agent CLIs."""
    if service.kind != "openai" or service.mock.enabled:
        return ""
    return service.base_url.strip().rstrip("/")


def cell_key(
    eval_plan: EvalPlan, case_id: str, case_hash: str, service: str, model: str, trial: int, service_hash: str
) -> str:
    """The resume key of one cell: everything that determines its result."""
    text = "\x1f".join(
        [eval_plan.id, case_id, case_hash, service, model, str(trial), eval_plan.result_hash, service_hash]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def iter_plan_cases(plan: RunPlan, ev: EvalPlan, *, check: bool = True) -> Iterator[Any]:
    """Stream an eval's selected cases (``plan.selection``): dataset lines, or agent case directories."""
    yield from plan.selection.apply(ev.id, _all_cases(plan, ev, check))


def _all_cases(plan: RunPlan, ev: EvalPlan, check: bool) -> Iterator[Any]:
    if ev.cases is not None:
        yield from load_cases(ev.cases, plan.registry_root)
        return
    assert ev.dataset_path is not None
    yield from iter_cases(plan.registry_root, ev.dataset_path, check_attachments=check, template=ev.template,
                          base=ev.base_dir)


def count_cells(plan: RunPlan) -> int:
    """Validate every dataset (streaming) and count the run's cells (its shard's, when sharded)."""
    if plan.run.shard_count > 1:
        for ev in plan.evals:  # validate first: a bad line is an error, whatever shard it falls in
            for _ in iter_plan_cases(plan, ev):
                pass
        return sum(1 for _ in planned_cells(plan))
    per_case = len(plan.run_models)
    return sum(sum(1 for _ in iter_plan_cases(plan, ev)) * ev.trials * per_case for ev in plan.evals)


def planned_cells(plan: RunPlan) -> Iterator[CellJob]:
    """Every cell of the plan (of its shard, with ``run.shard_count`` > 1) with its resume key:
    each case's trials together.

    Datasets are streamed once per eval (each line is parsed once, whatever the
    trial count).
    """
    svc_hash = service_result_hash(plan.service)
    index, count = plan.run.shard_index, plan.run.shard_count
    for ev in plan.evals:
        for case in iter_plan_cases(plan, ev, check=False):
            case_id, case_hash = _case_id(case), _case_hash(case)
            first = {m: cell_key(ev, case_id, case_hash, plan.service.name, m, 1, svc_hash)
                     for m in plan.run_models} if count > 1 else {}
            for trial in range(1, ev.trials + 1):
                for model in plan.run_models:  # models interleaved: one model's hang holds no other back
                    if count > 1 and shard_of(first[model], trial, count) != index:
                        continue  # another shard's cell: not hashed here
                    key = cell_key(ev, case_id, case_hash, plan.service.name, model, trial, svc_hash)
                    yield CellJob(key=key, eval=ev, case=case, trial=trial, model=model)


def shard_of(first_key: str, trial: int, count: int) -> int:
    """The shard (0..count-1) of a cell, from its identity alone (the same on every machine and rerun).

    A case's trials go round the shards from a start given by the key of its first
    trial, so a case with many trials (an agent eval's 16 slow trials) is split evenly,
    and cases with one trial spread by their keys.
    """
    return (int(first_key[:15], 16) + trial) % count


def _case_hash(case: Any) -> str:
    return str(getattr(case, "content_hash", "") or getattr(case, "name", ""))


def _case_id(case: Any) -> str:
    return str(getattr(case, "id", None) or getattr(case, "name", ""))
