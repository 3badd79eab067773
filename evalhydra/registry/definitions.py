"""A zig_eval-layout registry's definitions: ``services.json`` and ``evals/**``.

Field names, required fields, defaults and validation follow zig_eval: strings
are trimmed, an empty required string is an error, an empty optional string is
None, unknown eval keys are ignored. Datasets are streamed line by line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

import evalhydra.registry_data as registry_data
from evalhydra.config.schema import ServiceConfig
from evalhydra.core import safeyaml, strictjson
from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.registry.datasets import WHITESPACE, dataset_file

__all__ = [
    "SERVICE_KEYS",
    "Registry",
    "default_registry_root",
    "is_registry",
    "registry_origin",
    "load_registry",
    "resolve_registry_root",
]

MAX_DEFINITION_BYTES = 1 << 20
REQUIRED_SERVICE_FIELDS = ("name", "base_url", "default_model", "timeout_ms")
REQUIRED_EVAL_FIELDS = (
    "id",
    "group",
    "description",
    "dataset_path",
    "split",
    "matcher",
    "default_run_count",
)
EVAL_KEYS = REQUIRED_EVAL_FIELDS + ("service_allowlist", "tools", "max_attempts", "cases", "prompt",
                                    "messages", "params")
#: Keys a services.json entry may set: every field of the service schema.
SERVICE_KEYS = tuple(f.name for f in dataclasses.fields(ServiceConfig))


def default_registry_root() -> Path:
    """The registry that ships with the package (the repo's ``registry/``)."""
    return Path(next(iter(registry_data.__path__)))


def resolve_registry_root(value: str | os.PathLike[str] | None) -> Path:
    """Turn the ``registry`` config value into an absolute directory.

    ``registry`` (the default) means ``./registry`` when that folder is a registry
    (it has ``services.json`` or ``evals/``), else the packaged example registry, so
    ``python -m evalhydra`` works from anywhere and an unrelated ``./registry``
    folder changes nothing.

    Raises:
        EvalHydraError: The directory does not exist.
    """
    text = str(value or "registry")
    path = Path(text).expanduser()
    if text.rstrip("/") == "registry":  # the default: ./registry only when it is a registry
        return path.resolve() if is_registry(path) else default_registry_root().resolve()
    if path.is_dir():
        return path.resolve()
    raise EvalHydraError(
        f"registry={text}: no such directory.",
        "Point registry= at a folder with services.json, evals/ and data/.",
    )


def is_registry(path: Path) -> bool:
    """True for a folder with ``services.json`` or ``evals/`` (a zig_eval registry)."""
    return (path / "services.json").is_file() or (path / "evals").is_dir()


def registry_origin(root: Path) -> str:
    """How a resolved registry root was chosen, for the run summary."""
    if root == default_registry_root().resolve():
        return "the packaged example registry"
    if root == (Path.cwd() / "registry").resolve():
        return "./registry"
    return "registry="


@dataclass(frozen=True)
class Registry:
    """Services and eval definitions found under one registry root."""

    root: Path
    services: dict[str, dict[str, Any]]
    evals: dict[str, dict[str, Any]]

    def groups(self) -> dict[str, list[str]]:
        """Eval ids by group, in discovery order."""
        out: dict[str, list[str]] = {}
        for eval_id, spec in self.evals.items():
            out.setdefault(spec["group"], []).append(eval_id)
        return out

    def eval(self, eval_id: str) -> dict[str, Any]:
        """One eval definition by id, with "Did you mean" on a typo."""
        try:
            return self.evals[eval_id]
        except KeyError:
            raise EvalHydraError(
                f"Unknown eval '{eval_id}' in registry {self.root}.",
                did_you_mean(eval_id, self.evals),
            ) from None


def load_registry(root: Path) -> Registry:
    """Read and validate ``services.json`` and every eval definition under ``root``."""
    return _load_registry_cached(root.resolve(), _registry_stamp(root))


def _registry_stamp(root: Path) -> tuple[float, ...]:
    files = [root / "services.json", *_eval_files(root)]
    return tuple(f.stat().st_mtime for f in files if f.exists())


@cache
def _load_registry_cached(root: Path, stamp: tuple[float, ...]) -> Registry:
    return Registry(root=root, services=_load_services(root), evals=_load_evals(root))


def _read_definition(path: Path) -> Any:
    if path.stat().st_size > MAX_DEFINITION_BYTES:
        raise EvalHydraError(f"{path}: larger than 1 MiB.", "Split it into smaller files.")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lines_before = data.count(b"\n", 0, exc.start)
        raise EvalHydraError(f"{path}:{lines_before + 1}: not UTF-8 text (byte {exc.start}).",
                             "Save the file as UTF-8.") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            return safeyaml.load(text)
        return strictjson.loads(text)
    except ValueError as exc:  # JSON syntax, a repeated key, a lone surrogate escape (zig_eval refuses all)
        number = strictjson.error_line(text, exc)
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise EvalHydraError(f"{path}{f':{number}' if number else ''}: invalid JSON: {detail}.",
                             "Fix the JSON at that line: a missing comma, quote or bracket, or a key "
                             "written twice?") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise EvalHydraError(f"{path}{line}: invalid YAML: {exc}.",
                             "Fix the YAML at that line: an unclosed bracket or quote, or a misplaced indent?"
                             ) from None


def _clean(value: Any) -> Any:
    """Trim strings recursively (space, tab, CR, LF only); an empty string becomes None."""
    if isinstance(value, str):
        return value.strip(WHITESPACE) or None
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _require(spec: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    for name in fields:
        if spec.get(name) is None:
            raise EvalHydraError(f"{where}: required field '{name}' is missing or empty.",
                                 f'Add "{name}" with a non-empty value (zig_eval requires it).')


def _load_services(root: Path) -> dict[str, dict[str, Any]]:
    path = root / "services.json"
    if not path.exists():
        return {}
    raw = _read_definition(path)
    if not isinstance(raw, list):
        raise EvalHydraError(f"{path}: must be a JSON array of service objects.")
    services: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(raw):
        spec = _service_spec(item, f"{path}: service #{index + 1}")
        if spec["name"] in services:
            raise EvalHydraError(f"{path}: duplicate service name '{spec['name']}'.")
        services[spec["name"]] = spec
    return services


def _service_spec(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise EvalHydraError(f"{where}: must be a JSON object.")
    unknown = [key for key in item if key not in SERVICE_KEYS]
    if unknown:  # a typo (api_kee_env) would silently drop the key or the timeout
        raise EvalHydraError(f"{where}: unknown field '{unknown[0]}'.",
                             did_you_mean(unknown[0], SERVICE_KEYS))
    spec = {k: v for k, v in _clean(item).items() if v is not None}
    _require(spec, REQUIRED_SERVICE_FIELDS, where)
    if not isinstance(spec["timeout_ms"], int) or spec["timeout_ms"] <= 0:
        raise EvalHydraError(f"{where}: timeout_ms must be a positive integer.")
    if "retry" in spec:
        spec["retry"] = _retry_spec(spec["retry"], f"{where}: retry")
    return spec


def _retry_spec(retry: Any, where: str) -> dict[str, Any]:
    if not isinstance(retry, dict):
        raise EvalHydraError(f"{where}: must be an object.")
    out = {k: v for k, v in retry.items() if v is not None}
    validate_retry(out, where)
    return out


def validate_retry(retry: dict[str, Any], where: str) -> None:
    """Check zig_eval's retry ranges (shared by registry and Hydra services)."""
    attempts = retry.get("max_attempts", 1)
    if not isinstance(attempts, int) or not 1 <= attempts <= 10:
        raise EvalHydraError(f"{where}.max_attempts={attempts}: must be an integer in 1..10.")
    backoff = retry.get("backoff_ms", 0)
    if not isinstance(backoff, int) or not 0 <= backoff <= 60000:
        raise EvalHydraError(f"{where}.backoff_ms={backoff}: must be an integer in 0..60000.")
    for code in retry.get("retry_on_status") or []:
        if not isinstance(code, int) or not 100 <= code <= 599:
            raise EvalHydraError(f"{where}.retry_on_status: {code!r} is not a status in 100..599.")
    if retry.get("strategy", "linear") not in ("linear", "exponential"):
        raise EvalHydraError(
            f"{where}.strategy={retry.get('strategy')}: unknown.", "Use linear or exponential."
        )


def _eval_files(root: Path) -> list[Path]:
    evals = root / "evals"
    if not evals.is_dir():
        return []
    return sorted(p for p in evals.rglob("*") if p.suffix in (".json", ".yaml", ".yml") and p.is_file())


def _load_evals(root: Path) -> dict[str, dict[str, Any]]:
    evals: dict[str, dict[str, Any]] = {}
    for path in _eval_files(root):
        spec = _eval_spec(_read_definition(path), root, path)
        if spec["id"] in evals:
            raise EvalHydraError(
                f"{path}: duplicate eval id '{spec['id']}' (also in {evals[spec['id']]['source']})."
            )
        evals[spec["id"]] = spec
    return evals


def _eval_spec(raw: Any, root: Path, path: Path) -> dict[str, Any]:
    where = str(path)
    if not isinstance(raw, dict):
        raise EvalHydraError(f"{where}: an eval definition must be an object.")
    spec = {k: v for k, v in _clean(raw).items() if k in EVAL_KEYS and v is not None}
    is_agent = "cases" in spec
    required = ("id", "group", "matcher") if is_agent else REQUIRED_EVAL_FIELDS
    _require(spec, required, where)
    spec.setdefault("default_run_count", 1)
    count = spec["default_run_count"]
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        raise EvalHydraError(f"{where}: default_run_count must be a positive integer.")
    attempts = spec.get("max_attempts", 1)
    if not isinstance(attempts, int) or not 1 <= attempts <= 10:
        raise EvalHydraError(f"{where}: max_attempts must be an integer in 1..10.")
    if not isinstance(spec["matcher"], dict) or "kind" not in spec["matcher"]:
        raise EvalHydraError(f"{where}: matcher must be an object with a 'kind'.")
    tools = spec.get("tools") or []
    spec["tools"] = [_tool_spec(tool, f"{_at(path, tool)}: tools[{i}]") for i, tool in enumerate(tools)]
    if not is_agent:
        dataset_file(root, spec["dataset_path"], where)
    spec["source"] = where
    return spec


def _at(path: Path, tool: Any) -> str:
    """``path:line`` of a tool's name in its eval file (``path`` when it cannot be found)."""
    name = tool.get("name") if isinstance(tool, dict) else None
    if isinstance(name, str):
        text = path.read_text(encoding="utf-8")
        found = re.search(r'"name"\s*:\s*' + re.escape(json.dumps(name)), text)
        if found:
            return f"{path}:{text.count(chr(10), 0, found.start()) + 1}"
    return str(path)


def _tool_spec(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict):
        raise EvalHydraError(f"{where}: must be an object.")
    _require(tool, ("name", "description"), where)  # zig_eval requires both
    params = tool.get("parameters_json") or "{}"
    parsed = params if isinstance(params, dict) else _parse_json(params, f"{where}.parameters_json")
    if not isinstance(parsed, dict):
        raise EvalHydraError(f"{where}.parameters_json must be a JSON object.")
    return {
        "name": tool["name"],
        "description": tool["description"],
        "parameters_json": json.dumps(parsed, separators=(",", ":")),
    }


def _parse_json(text: Any, where: str) -> Any:
    try:
        return strictjson.loads(text)
    except (TypeError, ValueError) as exc:
        raise EvalHydraError(f"{where}: invalid JSON ({exc}).",
                             'Write a JSON object, e.g. {"type": "object"}.') from None
