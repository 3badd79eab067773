"""Validators written for zrb-llm-evaluator run unchanged.

A zrb validator imports ``from zrb_llm_evaluator.models import ValidationResult,
ValidationCheck, TrialTrace`` and ``from zrb_llm_evaluator.protocols import
ValidatorProtocol``. When zrb-llm-evaluator is installed those are its own
pydantic models, and the trace a validator receives is built as zrb's
``TrialTrace``. When it is not, :func:`provide_zrb_names` registers modules of
those names that hold evalhydra's equivalents (:mod:`evalhydra.agents.models`),
so the imports resolve and ``isinstance(trace, TrialTrace)`` and
``trace.model_dump()`` behave as in zrb.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

from evalhydra.agents import models

__all__ = ["PACKAGE", "provide_zrb_names", "trace_for_validator", "zrb_installed"]

#: The import name of zrb-llm-evaluator.
PACKAGE = "zrb_llm_evaluator"


def zrb_installed() -> bool:
    """Whether the real zrb-llm-evaluator can be imported (not evalhydra's stand-in)."""
    module = sys.modules.get(PACKAGE)
    if module is not None:
        return not getattr(module, "__evalhydra_stand_in__", False)
    try:
        return importlib.util.find_spec(PACKAGE) is not None
    except ImportError:  # a broken install, or an import hook that hides it
        return False


def provide_zrb_names() -> None:
    """Register ``zrb_llm_evaluator``, ``.models`` and ``.protocols`` when the package is absent."""
    if PACKAGE in sys.modules or zrb_installed():
        return
    names = {
        "models": {name: getattr(models, name) for name in (
            "ToolCallRecord", "TrialResult", "TrialTrace", "ValidationCheck", "ValidationResult")},
        "protocols": {"ValidatorProtocol": models.ValidatorProtocol,
                      "TrialTrace": models.TrialTrace, "ValidationResult": models.ValidationResult},
    }
    package = _module(PACKAGE, {**names["models"], "ValidatorProtocol": models.ValidatorProtocol})
    package.__path__ = []  # a package, so ``zrb_llm_evaluator.models`` can be imported
    for sub, content in names.items():
        module = _module(f"{PACKAGE}.{sub}", content)
        setattr(package, sub, module)


def _module(name: str, content: dict[str, Any]) -> types.ModuleType:
    module = types.ModuleType(name, f"evalhydra's stand-in for {name} (zrb-llm-evaluator is not installed).")
    module.__dict__.update(content)
    module.__evalhydra_stand_in__ = True  # type: ignore[attr-defined]
    sys.modules[name] = module
    return module


def trace_for_validator(trace: models.TrialTrace) -> Any:
    """The trace handed to ``validate``: zrb's own ``TrialTrace`` when zrb is installed."""
    if not zrb_installed():
        return trace
    zrb_models = importlib.import_module(f"{PACKAGE}.models")
    return zrb_models.TrialTrace.model_validate(trace.to_dict())
