"""Settings that act in one place only: the judge's own (``judge.*``), and the built-in mock's
(``service.mock.*``), refused where they would do nothing."""

from __future__ import annotations

import copy
from dataclasses import fields

from evalhydra.config.schema import JudgeConfig, MockConfig, ServiceConfig
from evalhydra.core.errors import EvalHydraError

__all__ = ["check_mock_settings", "check_ranges", "judge_service_config"]


def check_ranges(where: str, values: dict[str, tuple[float | None, float, float | None]]) -> None:
    """Check each ``key: (value, low, high)``: None values are unset and skipped; high None means
    unbounded.

    Raises:
        EvalHydraError: The first value out of its range, named with ``where``.
    """
    for key, (value, low, high) in values.items():
        if value is None:
            continue
        if value < low or (high is not None and value > high):
            bound = f"in {low}..{high}" if high is not None else f">= {low}"
            raise EvalHydraError(f"{where}: {key}={value}: must be {bound}.")


def check_mock_settings(svc: ServiceConfig, where: str) -> None:
    """Refuse ``service.mock.*`` set on a service that is not the built-in mock (it would do
    nothing), naming where the setting belongs.

    Raises:
        EvalHydraError: The first such setting.
    """
    if svc.mock.enabled:
        return
    default = MockConfig()
    for item in fields(MockConfig):
        value = getattr(svc.mock, item.name)
        if item.name == "enabled" or value == getattr(default, item.name):
            continue
        if item.name in ("judge_sensitivity", "judge_specificity"):
            key = f"judge.mock_{item.name.removeprefix('judge_')}"
            fix = (f"A judge's error rates are set on the judge: {key}={value} (for a judge that is the"
                   " mock, e.g. judge_service=mock_judge).")
        else:
            fix = ("Set it where the mock runs (python -m evalhydra.services.mock --help), or use"
                   " service=mock, whose mock starts with the run.")
        raise EvalHydraError(f"{where}: service.mock.{item.name}={value}: this service is not the built-in"
                             " mock (service.mock.enabled is false), so the setting would do nothing.", fix)


def judge_service_config(cfg: ServiceConfig, judge: JudgeConfig) -> ServiceConfig:
    """A judge service with ``judge.*``'s own settings on it.

    Args:
        cfg: The judge service as its file has it.
        judge: The run's ``judge`` settings.

    Returns:
        ``cfg`` itself when ``judge`` sets nothing, else a copy: the candidate's service (when it
        judges too) keeps its own settings, and its cells their keys.

    Raises:
        EvalHydraError: A value out of range, or mock error rates for a judge that is not the mock.
    """
    rates = {"judge_sensitivity": judge.mock_sensitivity, "judge_specificity": judge.mock_specificity}
    if judge.timeout_ms is None and all(v is None for v in rates.values()):
        return cfg
    out = copy.deepcopy(cfg)
    if judge.timeout_ms is not None:
        check_ranges(f"judge service '{cfg.name}'", {"judge.timeout_ms": (judge.timeout_ms, 1, None)})
        out.timeout_ms = judge.timeout_ms
    for field_name, rate in rates.items():
        if rate is None:
            continue
        key = f"judge.mock_{field_name.removeprefix('judge_')}"
        if not cfg.mock.enabled:
            raise EvalHydraError(f"{key}={rate}: judge service '{cfg.name}' is not the built-in mock, so it"
                                 " cannot be made to err.",
                                 "Use judge_service=mock_judge for a judge that errs on purpose; a real"
                                 " judge's error rates are measured: evalhydra calibrate.")
        check_ranges(f"judge service '{cfg.name}'", {key: (rate, 0, 1)})
        setattr(out.mock, field_name, float(rate))
    return out
