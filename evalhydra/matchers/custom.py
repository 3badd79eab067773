"""The ``custom`` matcher: your own Python, or a zrb ``validator.py``.

Exactly one of:

- ``_target_``: a dotted path to a function or a class. A class is
  instantiated with ``kwargs`` and the instance is called with the
  :class:`~evalhydra.matchers.base.MatchContext`; a function is called as
  ``fn(ctx, **kwargs)``. Either may be async. It returns a ``MatchResult``, a
  dict ``{score?, passed?, reason?, details?}``, a bool, or a number in [0, 1]
  (passing when ≥ ``pass_score``, default 1.0).
- ``validator``: a registry-relative ``validator.py`` whose module-level
  ``validator`` has ``validate(output_dir, log_content, trace=None)``
  returning a result with ``status`` (EXCELLENT | PASS | FAIL), ``score`` and
  ``details`` (checks with ``name``, ``passed``, ``message``). It runs in a
  worker thread with the agent's trial directory, or, for a text service, a
  temporary directory holding ``output.txt``; ``log_content`` is the agent's
  log, or the text output.

A matcher that raises becomes a ``matcher_error`` result (see the factory).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.usercode import USER_THREADS, UserCodeImportError, describe, import_file, passes_through
from evalhydra.core.values import PASSING, VALIDATION_STATUSES, MatchResult
from evalhydra.matchers.base import MatchContext, Matcher
from evalhydra.matchers.common import is_number, is_unit_number
from evalhydra.matchers.paths import resolve_registry_path

__all__ = [
    "build_custom",
    "check_custom",
    "coerce_result",
    "load_validator",
    "locate",
    "run_validator",
    "validation_to_result",
]

_validator_cache: dict[tuple[str, int], Any] = {}


def importable_from(root: Path) -> None:
    """Let a ``_target_`` import modules from the registry root (``custom_matchers.word_limit``
    for ``<registry>/custom_matchers.py``), after everything already on the path, so a registry
    module never shadows an installed package."""
    folder = str(root.resolve())
    if folder not in sys.path:
        sys.path.append(folder)


def locate(path: str) -> Any:
    """Import the object at a dotted path (``package.module.name``).

    Raises:
        ImportError: No importable module prefix, or the attribute is missing.
    """
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        try:
            obj: Any = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
                continue
            raise
        except BaseException as exc:  # importing runs the module: sys.exit() at import too
            if passes_through(exc):
                raise
            raise ImportError(f"importing {module} raised {describe(exc)}") from None
        for name in parts[cut:]:
            if not hasattr(obj, name):
                raise ImportError(f"{'.'.join(parts[:cut])} has no attribute {name!r}")
            obj = getattr(obj, name)
        return obj
    raise ImportError(f"no importable module in {path!r}")


def _check_kwargs(target: Any, kwargs: Mapping[str, Any], where: str, path: str) -> None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return
    try:
        if inspect.isclass(target):
            signature.bind(**kwargs)
        else:
            signature.bind(None, **kwargs)
    except TypeError as exc:
        raise EvalHydraError(f"{where}: kwargs do not fit custom matcher {path!r}: {exc}") from None


def _check_target(spec: Mapping[str, Any], where: str) -> None:
    path = spec["_target_"]
    try:
        target = locate(path)
    except Exception as exc:
        raise EvalHydraError(f"{where}: cannot import custom matcher {path!r}: {exc}") from None
    if not callable(target):
        raise EvalHydraError(f"{where}: custom matcher {path!r} is not callable")
    _check_kwargs(target, spec.get("kwargs") or {}, where, path)


def load_validator(path: Path, name: str) -> Any:
    """Import a ``validator.py`` and return its module-level ``validator`` (cached).

    Raises:
        EvalHydraError: The file fails to import or lacks a ``validator`` with ``validate``.
    """
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _validator_cache:
        try:
            module = import_file(path, "evalhydra_validator_")
        except UserCodeImportError as exc:
            raise EvalHydraError(f"{name}: validator.py {exc}") from None
        validator = getattr(module, "validator", None)
        if not callable(getattr(validator, "validate", None)):
            raise EvalHydraError(
                f"{name}: validator.py must define a module-level 'validator' with "
                "validate(output_dir, log_content, trace=None)"
            )
        _validator_cache[key] = validator
    return _validator_cache[key]


def check_custom(spec: Mapping[str, Any], root: Path, where: str) -> None:
    """Load-time checks: exactly one of ``_target_``/``validator``, and it loads.

    Raises:
        EvalHydraError: Naming the problem.
    """
    has_target, has_validator = "_target_" in spec, "validator" in spec
    if has_target == has_validator:
        raise EvalHydraError(f"{where}: a custom matcher needs exactly one of _target_ or validator")
    if has_validator and "kwargs" in spec:
        raise EvalHydraError(f"{where}: 'kwargs' applies only to a _target_ custom matcher")
    if has_target:
        importable_from(root)
        _check_target(spec, where)
    else:
        path = resolve_registry_path(root, spec["validator"], where=where, what="validator")
        load_validator(path, spec["validator"])


def _checked_score(score: Any) -> float:
    if not is_unit_number(score):
        raise ValueError(f"custom matcher score must be a number in [0, 1], got {score!r}")
    return float(score)


def _from_dict(value: Mapping[str, Any], pass_score: float) -> MatchResult:
    if "score" not in value and "passed" not in value:
        raise ValueError("custom matcher dict needs 'score' or 'passed'")
    verdict = value.get("passed")
    if verdict is not None and not isinstance(verdict, bool):
        raise TypeError(f"custom matcher 'passed' must be a bool, got {verdict!r}")
    score = _checked_score(value["score"]) if "score" in value else float(bool(verdict))
    ok = verdict if verdict is not None else score >= pass_score
    reason = value.get("reason")
    reason = None if ok else (str(reason) if reason else "custom matcher failed")
    return MatchResult(passed=ok, score=score, reason=reason, details=value.get("details"))


def coerce_result(value: Any, pass_score: float = 1.0) -> MatchResult:
    """Turn what a custom matcher returned into a MatchResult.

    Raises:
        TypeError: An unsupported return type.
        ValueError: A score outside [0, 1].
    """
    if isinstance(value, MatchResult):
        _checked_score(value.score)
        return value
    if isinstance(value, bool):
        return MatchResult(value, float(value), None if value else "custom matcher returned False")
    if isinstance(value, Mapping):
        return _from_dict(value, pass_score)
    if is_number(value):
        score = _checked_score(value)
        ok = score >= pass_score
        return MatchResult(ok, score, None if ok else f"score {score:.3f} below {pass_score:.3f}")
    raise TypeError(f"custom matcher returned {type(value).__name__}, not a result")


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def validation_to_result(result: Any) -> MatchResult:
    """Turn a zrb ``ValidationResult`` (object or dict) into a MatchResult.

    Raises:
        ValueError: An unknown status or a score outside [0, 1].
    """
    status = _field(result, "status")
    status = str(getattr(status, "value", status)).upper()
    if status not in VALIDATION_STATUSES:
        raise ValueError(f"validator returned unknown status {status!r}")
    checks: list[dict[str, Any]] = [
        {
            "name": str(_field(c, "name", "")),
            "passed": bool(_field(c, "passed", False)),
            "message": str(_field(c, "message", "") or ""),
        }
        for c in _field(result, "details", None) or []
    ]
    ok = status in PASSING
    failing = [
        f"{c['name']}: {c['message']}" if c["message"] else c["name"] for c in checks if not c["passed"]
    ]
    reason = None if ok else "; ".join([f"validator status {status}", *failing])
    score = _checked_score(_field(result, "score", 1.0 if ok else 0.0))
    return MatchResult(ok, score, reason, details={"status": status, "checks": checks})


def run_validator(validator: Any, ctx: MatchContext) -> MatchResult:
    """Call ``validator.validate`` (blocking) and convert its result."""
    log = ctx.log_content or ctx.output
    if ctx.output_dir is not None:
        return validation_to_result(validator.validate(ctx.output_dir, log, trace=ctx.trace))
    with tempfile.TemporaryDirectory(prefix="evalhydra-validate-") as tmp:
        out = Path(tmp)
        (out / "output.txt").write_text(ctx.output, encoding="utf-8")
        return validation_to_result(validator.validate(out, log, trace=ctx.trace))


def _target_matcher(spec: Mapping[str, Any]) -> Matcher:
    target, kwargs = locate(spec["_target_"]), dict(spec.get("kwargs") or {})
    pass_score = float(spec.get("pass_score", 1.0))
    call: Any = target(**kwargs) if inspect.isclass(target) else None
    function = call if call is not None else target
    asynchronous = inspect.iscoroutinefunction(function) or (
        call is not None and inspect.iscoroutinefunction(type(call).__call__))

    async def match(ctx: MatchContext) -> MatchResult:
        def run() -> Any:
            return call(ctx) if call is not None else target(ctx, **kwargs)

        # a blocking matcher runs in a user-code thread, never in the event loop
        value = run() if asynchronous else await USER_THREADS.run_sync(run)
        if inspect.isawaitable(value):
            value = await value
        return coerce_result(value, pass_score)

    return match


def build_custom(spec: Mapping[str, Any], root: Path, where: str = "matcher") -> Matcher:
    """Build a ``custom`` matcher from a cleaned spec."""
    if "_target_" in spec:
        importable_from(root)
        return _target_matcher(spec)
    path = resolve_registry_path(root, spec["validator"], where=where, what="validator")
    validator = load_validator(path, spec["validator"])

    async def match(ctx: MatchContext) -> MatchResult:
        return await USER_THREADS.run_sync(lambda: run_validator(validator, ctx))

    return match
