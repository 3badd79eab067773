"""From a composed Hydra config to a validated, frozen :class:`RunPlan`.

The Hydra entry point composes; :func:`build_plan` validates everything a run
needs before any call (services, evals, matchers, judges, datasets) and returns
plain frozen objects that the runner and tests use directly.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from omegaconf import DictConfig, OmegaConf

from evalhydra.agents.command import check_executable, validate_command_service
from evalhydra.compose.compose import eval_choice, eval_config_file, to_config
from evalhydra.config.redact import redact
from evalhydra.config.schema import CacheConfig, Config, RunConfig, ServiceConfig, TelemetryConfig
from evalhydra.core import strictjson
from evalhydra.core.envfiles import value_origin
from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.core.messages import MessageError, check_messages
from evalhydra.core.values import ToolSpec
from evalhydra.matchers.factory import (
    validate_matcher,
    with_judge_options,
    with_judge_service,
)
from evalhydra.plan.cells import digest
from evalhydra.plan.files import place_matcher_files
from evalhydra.plan.model import CachePlan, EvalPlan, RunPlan
from evalhydra.plan.placement import check_mock_settings, check_ranges
from evalhydra.plan.selection import selection_of
from evalhydra.plan.services import known_service_sources, other_services
from evalhydra.plan.tools import loop_plan
from evalhydra.plan.users import conversation_loop, tau2_classes, user_plan
from evalhydra.registry.datasets import CaseTemplate
from evalhydra.registry.definitions import Registry, load_registry, resolve_registry_root, validate_retry
from evalhydra.services.cache import default_cache_path, parse_expiry
from evalhydra.services.mock.settings import MockSettings
from evalhydra.telemetry.export import check_export

__all__ = ["build_plan", "known_service_sources"]


def build_plan(cfg: DictConfig, overrides: Sequence[str] = ()) -> RunPlan:
    """Validate a composed config and produce the frozen plan of the run.

    Raises:
        EvalHydraError: Anything a user must fix, naming the key and the options.
    """
    conf = to_config(cfg)
    root = resolve_registry_root(conf.registry)
    registry = load_registry(root)
    service = _check_service(conf.service, registry)
    models = _models(service)
    model = models[0]
    evals, skipped = _plan_evals(conf, registry, service.name, eval_choice(overrides))
    _warn_broken(registry)
    if not evals:
        raise EvalHydraError(
            "No eval runs matched: every selected eval excludes service "
            f"'{service.name}' in its service_allowlist ({', '.join(skipped)}).",
            "Choose another service=, or another eval=.",
        )
    _check_kinds_match(service, models, evals)
    looped = [e.id for e in evals if e.loop is not None]
    if looped and service.batch.enabled:
        raise EvalHydraError(f"service.batch.enabled: {looped[0]} runs a tool loop, which batch mode cannot.",
                             "A loop's next request needs the last answer: run it without"
                             " service.batch.enabled=true.")
    judges = other_services(conf, registry, evals, service)
    plain = redact(OmegaConf.to_container(cfg, resolve=True))
    return RunPlan(
        service=service,
        model=model,
        evals=tuple(evals),
        judges=judges,
        registry_root=root,
        run=_check_run(conf.run),
        store_path=Path(conf.store.path).expanduser().resolve(),
        fingerprint=digest(plain),
        config=plain,
        overrides=tuple(overrides),
        skipped=tuple(skipped),
        models=models if len(models) > 1 else (),
        cache=_cache_plan(conf.cache),
        telemetry=_telemetry_plan(conf.telemetry),
        selection=selection_of(conf.run),
        url_origin=_url_origin(cfg),
    )


def _url_origin(cfg: DictConfig) -> str:
    """Where ``service.base_url`` came from, read from its text before interpolation."""
    raw = OmegaConf.to_container(cfg.service, resolve=False) if "service" in cfg else {}
    return value_origin(raw.get("base_url") if isinstance(raw, dict) else None, "service.base_url")


def _warn_broken(registry: Registry) -> None:
    """One line per registry eval file that does not load: not selected, so the run goes on."""
    for error in registry.broken.values():
        print(f"warning: {error.message} (not selected: skipped)", file=sys.stderr)


def _telemetry_plan(telemetry: TelemetryConfig) -> TelemetryConfig | None:
    """The run's telemetry, checked now (None: off)."""
    check_export(telemetry.export, telemetry.endpoint)
    return telemetry if telemetry.export != "none" else None


def _cache_plan(cache: CacheConfig) -> CachePlan | None:
    """The response cache's settings, checked (None when it is off)."""
    if not cache.enabled:
        return None
    path = Path(cache.path).expanduser() if cache.path else default_cache_path()
    return CachePlan(path.resolve(), parse_expiry(cache.expiry), bool(cache.judge))


def _models(service: ServiceConfig) -> tuple[str, ...]:
    """The run's models: ``service.models`` (agent CLIs, one pool for all, as zrb's ``--models a,b``),
    else ``service.model`` or the default."""
    listed = tuple(dict.fromkeys(str(m).strip() for m in service.models))
    if service.model is not None and not service.model.strip():  # service.model='' is no model
        raise EvalHydraError("service.model: the model name is empty.",
                             f"Name one (service.model=NAME), or leave it unset for the default "
                             f"({service.default_model}).")
    if not listed:
        return (service.model or service.default_model,)
    if service.kind != "command":
        raise EvalHydraError(
            f"service.models={list(service.models)}: several models in one run are for agent CLIs.",
            "Sweep chat models instead: -m service.model=a,b")
    return listed


def _check_kinds_match(service: ServiceConfig, models: tuple[str, ...], evals: list[EvalPlan]) -> None:
    """Agent evals need a command service and chat evals an HTTP one."""
    for ev in evals:
        is_agent = ev.cases is not None
        if is_agent and service.kind != "command":
            raise EvalHydraError(
                f"eval '{ev.id}' runs agent CLIs; service '{service.name}' is kind '{service.kind}'.",
                "Choose a command service, e.g. service=fake_agent.",
            )
        if not is_agent and service.kind == "command":
            raise EvalHydraError(
                f"service '{service.name}' is an agent CLI; eval '{ev.id}' needs a chat service.",
                "Choose an agent eval, e.g. eval=agent_cases.",
            )
    if service.kind == "command":
        for model in models:
            validate_command_service(service, model)
        check_executable(service, models[0])


def _check_run(run: RunConfig) -> RunConfig:
    if run.concurrency < 1:
        raise EvalHydraError(f"run.concurrency={run.concurrency}: must be at least 1.")
    if run.batch_size < 1:
        raise EvalHydraError(f"run.batch_size={run.batch_size}: must be at least 1.")
    if run.retry_errors not in (None, True, False, "all"):
        raise EvalHydraError(f"run.retry_errors={run.retry_errors}: must be true, false, null or all.",
                             "all also re-sends 4xx replies that cannot succeed as sent (400, 401, 404, …).")
    if run.fail_under is not None and not 0 <= run.fail_under <= 1:
        raise EvalHydraError(f"run.fail_under={run.fail_under}: must be in 0..1.")
    if run.fail_under_pass_hat_k is not None and not 0 <= run.fail_under_pass_hat_k <= 1:
        raise EvalHydraError(f"run.fail_under_pass_hat_k={run.fail_under_pass_hat_k}: must be in 0..1.")
    if run.require_judge_labels is not None and run.require_judge_labels < 0:
        raise EvalHydraError(f"run.require_judge_labels={run.require_judge_labels}: must be at least 0.",
                             "The number of labelled outputs a judge needs (evalhydra label).")
    if run.min_judge_kappa is not None and not -1 <= run.min_judge_kappa <= 1:
        raise EvalHydraError(f"run.min_judge_kappa={run.min_judge_kappa}: must be in -1..1.",
                             "Cohen's kappa: 0 is chance agreement, 1 perfect; 0.6 is a common bar.")
    if run.pass_hat_k is not None and run.pass_hat_k < 1:
        raise EvalHydraError(f"run.pass_hat_k={run.pass_hat_k}: must be at least 1.",
                             "Leave it unset to use every trial of each case.")
    if not 0 <= run.max_error_rate <= 1:
        raise EvalHydraError(f"run.max_error_rate={run.max_error_rate}: must be in 0..1.")
    if run.shard_count < 1 or not 0 <= run.shard_index < run.shard_count:
        raise EvalHydraError(
            f"run.shard_index={run.shard_index} run.shard_count={run.shard_count}: the index must be in "
            "0..shard_count-1.",
            "Split one eval N ways with -m run.shard_index=0,1,...,N-1 run.shard_count=N.")
    return run


def _check_service(svc: ServiceConfig, registry: Registry) -> ServiceConfig:
    where = f"service '{svc.name}'"
    if svc.name in registry.services:
        where += f" ({registry.root / 'services.json'})"
    if svc.kind not in ("openai", "command", "recorded"):
        raise EvalHydraError(f"{where}: service.kind={svc.kind} is unknown.",
                             "Use openai, command or recorded.")
    if svc.api not in ("chat", "responses"):
        raise EvalHydraError(f"{where}: service.api={svc.api} is unknown.",
                             did_you_mean(svc.api, ["chat", "responses"]))
    tags = list(svc.reasoning.tags)
    if len(tags) != 2 or not all(isinstance(t, str) and t.strip() for t in tags):
        raise EvalHydraError(f"{where}: service.reasoning.tags={tags} must be two tags, opening and closing.",
                             "e.g. 'service.reasoning.tags=[\"<think>\",\"</think>\"]'")
    check_ranges(where, {
        "service.timeout_ms": (svc.timeout_ms, 1, None),
        "service.deadline_ms": (svc.deadline_ms, 1, None),
        "service.max_concurrency": (svc.max_concurrency, 1, 4096),
        "service.rate_limit.rpm": (svc.rate_limit.rpm, 1, None),
        "service.rate_limit.tpm": (svc.rate_limit.tpm, 1, None),
        "service.pricing.input_per_mtok": (svc.pricing.input_per_mtok, 0, None),
        "service.pricing.output_per_mtok": (svc.pricing.output_per_mtok, 0, None),
        "service.pricing.cached_input_per_mtok": (svc.pricing.cached_input_per_mtok, 0, None),
    })
    validate_retry(OmegaConf.to_container(OmegaConf.structured(svc.retry)), "service.retry")  # type: ignore[arg-type]
    check_mock_settings(svc, where)
    if svc.kind == "openai" and not svc.base_url and not svc.mock.enabled:
        raise EvalHydraError(
            f"{where}: service.base_url is empty.", "Set service.base_url=http://host:port/v1."
        )
    if svc.kind == "openai" and not svc.mock.enabled:
        parts = urlsplit(svc.base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EvalHydraError(f"{where}: service.base_url={svc.base_url!r} must be http:// or https:// "
                                 "with a host.", "For example: service.base_url=http://127.0.0.1:8000/v1")
    if svc.mock.enabled:
        _check_mock(svc, where)
    if svc.batch.enabled:
        _check_batch(svc, where)
    return svc


def _check_batch(svc: ServiceConfig, where: str) -> None:
    """Batch mode is for chat services, with limits a provider can take."""
    batch = svc.batch
    if svc.kind == "command":
        raise EvalHydraError(f"{where}: service.batch.enabled=true on an agent CLI: agent trials run here,"
                             " there is no batch API to send them to.", "Set service.batch.enabled=false.")
    if svc.stream:
        raise EvalHydraError(f"{where}: service.batch.enabled=true with service.stream=true: a batch line"
                             " is answered whole.", "Set service.stream=false for batch mode.")
    if batch.fallback not in ("batch", "online"):
        raise EvalHydraError(f"{where}: service.batch.fallback={batch.fallback} is unknown.",
                             "Use service.batch.fallback=batch or online.")
    check_ranges(where, {
        "service.batch.poll_interval_s": (batch.poll_interval_s, 0.001, None),
        "service.batch.poll_timeout_s": (batch.poll_timeout_s, 0, None),
        "service.batch.max_requests": (batch.max_requests, 1, 50000),
        "service.batch.max_bytes": (batch.max_bytes, 1024, None),
        "service.pricing.batch_discount": (svc.pricing.batch_discount, 0, 1),
    })


def _check_mock(svc: ServiceConfig, where: str) -> None:
    try:
        MockSettings.from_config(svc.mock)
    except ValueError as exc:
        raise EvalHydraError(f"{where}: service.mock: {exc}") from None


def _plan_evals(conf: Config, registry: Registry, service: str,
                choice: str | None = None) -> tuple[list[EvalPlan], list[str]]:
    composed = OmegaConf.to_container(OmegaConf.structured(conf.eval))
    assert isinstance(composed, dict)
    node: dict[str, Any] = {str(k): v for k, v in composed.items()}
    if not node.get("include"):
        node = _config_file_eval(node, choice, registry)
    suite_matcher = node.get("matcher") if node.get("include") else None
    suite_params = (node.get("params") or {}) if node.get("include") else {}
    members = [registry.eval(i) for i in node["include"]] if node.get("include") else [node]
    plans, skipped = [], []
    for member in members:
        spec = dict(member)
        allow = spec.get("service_allowlist")
        if allow and service not in allow:
            skipped.append(spec["id"])
            continue
        spec["params"] = {**(spec.get("params") or {}), **suite_params}  # eval=GROUP eval.params.x=…
        plans.append(_eval_plan(spec, conf, registry.root, suite_matcher))
    return plans, skipped


def _config_file_eval(node: dict[str, Any], choice: str | None, registry: Registry) -> dict[str, Any]:
    """One selected eval with the file it came from: a config directory's ``eval/NAME.yaml`` (its
    id defaults to NAME) or the registry's file. Its paths resolve against that file's folder first."""
    path = eval_config_file(choice)
    node = dict(node)
    if path is None and node.get("id") in registry.evals:
        known = registry.evals[node["id"]]
        return {**node, **{key: known.get(key) for key in ("source", "base_dir", "wire")}}
    if not node.get("id"):
        if not choice:
            raise EvalHydraError("eval.id: the eval has no id.",
                                 "Add id: NAME to its file, or set eval.id=NAME.")
        node["id"] = choice
    if path is not None:
        node["base_dir"] = str(path.parent)
        node["source"] = str(path)
    return node


def _eval_plan(spec: dict[str, Any], conf: Config, root: Path, suite_matcher: Any) -> EvalPlan:
    where = spec.get("source") or f"eval '{spec['id']}'"
    if spec.get("cases") is not None:
        matcher: dict[str, Any] = {}  # agent evals: each case's validator.py scores it
    else:
        matcher = _matcher_spec(spec, conf, suite_matcher, where)
        if conf.judge_service:
            matcher = with_judge_service(matcher, conf.judge_service)
        if conf.judge.include_reasoning:  # set only when asked, so other cells keep their keys
            matcher = with_judge_options(matcher, include_reasoning=True)
        if spec.get("wire") == "zig_eval" and matcher.get("kind") == "tool_call":
            matcher = {"strict_arguments": True, **matcher}
        if matcher.get("kind") == "tau2":  # τ²'s domain: the eval's tools, and the user's
            matcher = {**tau2_classes(spec), **matcher}
        matcher = validate_matcher(place_matcher_files(matcher, spec.get("base_dir"), root),
                                   f"{where}: matcher", registry_root=root)
    attempts = spec.get("max_attempts", 1)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or not 1 <= attempts <= 10:
        raise EvalHydraError(f"{where}: max_attempts={attempts!r}: must be an integer in 1..10.")
    trials = conf.trials if conf.trials is not None else int(spec.get("default_run_count") or 1)
    if not 1 <= trials <= 10000:
        raise EvalHydraError(f"trials={trials}: must be in 1..10000.")
    if spec.get("dataset_path") is None and spec.get("cases") is None:
        raise EvalHydraError(f"{where}: needs dataset_path (or cases for agent evals).")
    loop, class_specs = loop_plan(spec, root, where)
    user = user_plan(spec.get("user"), where, root)
    if user is not None:
        loop = conversation_loop(loop, spec.get("loop") or {})
    plan = EvalPlan(
        id=spec["id"],
        group=spec.get("group") or spec["id"].split(".")[0],
        description=spec.get("description") or "",
        dataset_path=spec.get("dataset_path"),
        split=spec.get("split") or "test",
        matcher=matcher,
        trials=trials,
        tools=(*(_tool(t, where) for t in spec.get("tools") or []), *class_specs),
        refinement_attempts=attempts,
        cases=spec.get("cases"),
        template=_template(spec, where),
        params=_params(spec.get("params"), where),
        base_dir=Path(spec["base_dir"]) if spec.get("base_dir") else None,
        loop=loop,
        wire=spec.get("wire") or "",
        user=user,
    )
    if loop is not None and attempts > 1:
        raise EvalHydraError(f"{where}: max_attempts={attempts} with a tool loop.",
                             "A tool loop is one conversation: leave max_attempts at 1.")
    return replace(plan, result_hash=_result_hash(plan))


def _result_hash(plan: EvalPlan) -> str:
    """Everything of the eval that decides a result; the template and params join it only
    when set, so evals without them keep the keys they always had."""
    tools = [(t.name, t.description, t.parameters) for t in plan.tools]
    parts: list[Any] = [plan.matcher, tools, plan.refinement_attempts]
    extra = {"prompt": plan.template.prompt, "messages": plan.template.messages, "params": plan.params,
             "loop": asdict(plan.loop) if plan.loop else None, "wire": plan.wire,
             "user": plan.user.identity if plan.user else None}
    extra = {k: v for k, v in extra.items() if v}
    if extra:
        parts.append(extra)
    return digest(parts)


def _template(spec: dict[str, Any], where: str) -> CaseTemplate:
    prompt, messages = spec.get("prompt"), spec.get("messages")
    if prompt is not None and messages is not None:
        raise EvalHydraError(f"{where}: set prompt or messages, not both.")
    if prompt is not None and not isinstance(prompt, str):
        raise EvalHydraError(f"{where}: prompt must be a string template ({{{{field}}}} placeholders).")
    if messages is not None:
        try:
            messages = list(check_messages(messages, need_user=spec.get("user") is None))
        except MessageError as exc:
            hint = "For example: messages: [{role: user, content: '{{question}}'}]"
            raise EvalHydraError(f"{where}: {exc}.", hint) from None
    return CaseTemplate(prompt=prompt, messages=messages)


def _params(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise EvalHydraError(f"{where}: params must be a mapping of request fields (temperature, …).")
    return dict(value)


def _matcher_spec(spec: dict[str, Any], conf: Config, suite: Any, where: str) -> dict[str, Any]:
    chosen: Any = spec.get("matcher")
    if suite:
        chosen = suite
    if conf.matcher is not None:
        chosen = OmegaConf.to_container(OmegaConf.structured(conf.matcher))
    if not isinstance(chosen, dict) or not chosen.get("kind"):
        raise EvalHydraError(f"{where}: no matcher.", "Set matcher=exact_match (or another kind).")
    return {k: v for k, v in chosen.items() if v is not None}


def _tool(tool: Any, where: str) -> ToolSpec:
    try:
        params = strictjson.loads(tool["parameters_json"] or "{}")
    except ValueError as exc:
        raise EvalHydraError(f"{where}: tool '{tool['name']}' parameters_json: {exc}.") from None
    if not isinstance(params, dict):
        raise EvalHydraError(f"{where}: tool '{tool['name']}' parameters_json must be a JSON object.")
    return ToolSpec(name=tool["name"], description=tool.get("description") or "", parameters=params)
