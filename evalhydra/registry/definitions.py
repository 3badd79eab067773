"""A zig_eval-layout registry's definitions: ``services.json`` and ``evals/**``.

A JSON eval in a registry with ``services.json`` (zig_eval's layout) follows zig_eval: every
field is required, unknown keys are ignored, paths are relative to the registry root. Any other
eval file (YAML, or JSON in a registry without ``services.json``) is evalhydra's own format: only
``dataset_path`` and ``matcher`` are required (``id`` defaults to the file's path under
``evals/``), unknown keys are errors, and paths resolve against the file's folder first. Strings
are trimmed either way, and every problem of a file is reported in one error.
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
    "default_eval_id",
    "is_zig_eval_file",
    "MATCHER_FILE_OPTIONS",
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
                                    "messages", "params", "tool_class", "loop", "mcp", "user")
#: Each matcher kind's option that names a file (relative to the registry root in zig_eval).
MATCHER_FILE_OPTIONS = {"rubric": "prompt", "json_schema": "schema", "custom": "validator"}
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


class DuplicateEvalError(EvalHydraError):
    """Two eval files claim one id."""

    def __init__(self, eval_id: str, path: Path, other: str) -> None:
        self.eval_id = eval_id
        super().__init__(f"{path}: duplicate eval id '{eval_id}' (also in {other}).",
                         "Give one of them another id.")


@dataclass(frozen=True)
class Registry:
    """Services and eval definitions found under one registry root."""

    root: Path
    services: dict[str, dict[str, Any]]
    evals: dict[str, dict[str, Any]]
    broken: dict[str, EvalHydraError] = dataclasses.field(default_factory=dict)  # file -> why it won't load
    conflicts: dict[str, EvalHydraError] = dataclasses.field(default_factory=dict)  # id in two files

    def broken_for(self, name: str) -> EvalHydraError | None:
        """The load error of an eval file that would define eval (or group) ``name``: an id two
        files claim, or a file whose default id (its path under ``evals/``) is ``name`` or in
        group ``name``."""
        if name in self.conflicts:
            return self.conflicts[name]
        for path, error in self.broken.items():
            eval_id = default_eval_id(self.root, Path(path))
            if name in (eval_id, eval_id.split(".")[0]):
                return error
        return None

    def groups(self) -> dict[str, list[str]]:
        """Eval ids by group, in discovery order."""
        out: dict[str, list[str]] = {}
        for eval_id, spec in self.evals.items():
            out.setdefault(spec["group"], []).append(eval_id)
        return out

    def eval(self, eval_id: str) -> dict[str, Any]:
        """One eval definition by id, with "Did you mean" on a typo (or the load error of the
        broken file that would define it)."""
        try:
            return self.evals[eval_id]
        except KeyError:
            broken = self.broken_for(eval_id)
            if broken is not None:
                raise broken from None
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
    evals, broken = _load_evals(root)
    conflicts: dict[str, EvalHydraError] = {}
    for error in broken.values():
        if isinstance(error, DuplicateEvalError):
            conflicts[error.eval_id] = error
            evals.pop(error.eval_id, None)  # neither file wins: selecting the id says why
    return Registry(root=root, services=_load_services(root), evals=evals, broken=broken, conflicts=conflicts)


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
    """Trim strings recursively (space, tab, CR, LF only); an empty string becomes None. An OpenAI
    Evals suite's ``testing_criteria`` are kept byte for byte: its references are compared as
    written (``"Paris "`` is not ``"Paris"``, and ``""`` is a reference)."""
    if isinstance(value, str):
        return value.strip(WHITESPACE) or None
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: v if k == "testing_criteria" else _clean(v) for k, v in value.items()}
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


def _load_evals(root: Path) -> tuple[dict[str, dict[str, Any]], dict[str, EvalHydraError]]:
    """Every eval file that loads, and the error of each that does not: a broken file stops a
    run only when it is selected (:meth:`Registry.eval`, :meth:`Registry.broken_for`)."""
    evals: dict[str, dict[str, Any]] = {}
    broken: dict[str, EvalHydraError] = {}
    for path in _eval_files(root):
        try:
            spec = _eval_spec(_read_definition(path), root, path)
            if spec["id"] in evals:
                raise DuplicateEvalError(spec["id"], path, evals[spec["id"]]["source"])
        except EvalHydraError as exc:
            broken[str(path)] = exc
            continue
        evals[spec["id"]] = spec
    return evals, broken


def is_zig_eval_file(root: Path, path: Path) -> bool:
    """True for a JSON eval in a zig_eval-layout registry (one with ``services.json``): zig_eval's
    rules hold there (every field required, paths relative to the registry root)."""
    return path.suffix == ".json" and (root / "services.json").is_file()


#: An own-format eval's optional fields and their defaults (``group``: the id up to its first dot).
EVAL_DEFAULTS: dict[str, Any] = {"description": "", "split": "test", "default_run_count": 1}


def _eval_spec(raw: Any, root: Path, path: Path) -> dict[str, Any]:
    where = str(path)
    if not isinstance(raw, dict):
        raise EvalHydraError(f"{where}: an eval definition must be an object.",
                             "Write a mapping, e.g. dataset_path: data.jsonl and matcher: {kind: includes}.")
    zig = is_zig_eval_file(root, path)
    problems: list[str] = []
    if not zig:
        problems += [f"unknown field '{key}' ({did_you_mean(str(key), EVAL_KEYS).splitlines()[0]})"
                     for key in raw if key not in EVAL_KEYS]
    spec = {k: v for k, v in _clean(raw).items() if k in EVAL_KEYS and v is not None}
    is_agent = "cases" in spec
    if not zig:
        spec.setdefault("id", default_eval_id(root, path))
        spec.setdefault("group", str(spec["id"]).split(".")[0])
        for key, value in EVAL_DEFAULTS.items():
            spec.setdefault(key, value)
    required = ("id", "group", "matcher") if is_agent else REQUIRED_EVAL_FIELDS
    problems += [f"required field '{name}' is missing or empty (add \"{name}\" with a non-empty value"
                 f"{', as zig_eval requires' if zig else ''})" for name in required if spec.get(name) is None]
    problems += _field_problems(spec)
    if zig:
        problems += [f"matcher {key} '{value}' is absolute: zig_eval paths are relative to the registry root"
                     for key, value in _matcher_files(spec.get("matcher")) if value.startswith("/")]
    if problems:
        raise EvalHydraError(f"{where}: {'; '.join(problems)}.",
                             "Every eval field is described in docs/eval-files.md.")
    tools = spec.get("tools") or []
    spec["tools"] = [_tool_spec(tool, f"{_at(path, tool)}: tools[{i}]") for i, tool in enumerate(tools)]
    if zig:
        spec["wire"] = "zig_eval"  # replies are read as zig_eval reads them
    else:
        spec["base_dir"] = str(path.parent)
    if not is_agent:
        dataset_file(root, spec["dataset_path"], where, base=None if zig else path.parent)
    spec["source"] = where
    return spec


def default_eval_id(root: Path, path: Path) -> str:
    """An eval's id when its file names none: its path under ``evals/`` without the suffix,
    folders joined by dots (``evals/smoke/reply_ok.yaml`` is ``smoke.reply_ok``)."""
    return ".".join(path.relative_to(root / "evals").with_suffix("").parts)


def _matcher_files(matcher: Any) -> list[tuple[str, str]]:
    """(option, path) of every file a matcher (and its parts) names."""
    if not isinstance(matcher, dict):
        return []
    key = MATCHER_FILE_OPTIONS.get(str(matcher.get("kind")))
    found = [(key, matcher[key])] if key and isinstance(matcher.get(key), str) else []
    for part in matcher.get("parts") or []:
        found += _matcher_files(part)
    return found


def _field_problems(spec: dict[str, Any]) -> list[str]:
    """What is wrong with the fields that are present, each with its fix."""
    problems = []
    count = spec.get("default_run_count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        problems.append("default_run_count must be a positive integer (e.g. default_run_count: 3)")
    attempts = spec.get("max_attempts", 1)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or not 1 <= attempts <= 10:
        problems.append("max_attempts must be an integer in 1..10")
    matcher = spec.get("matcher")
    if matcher is not None and (not isinstance(matcher, dict) or "kind" not in matcher):
        problems.append("matcher must be an object with a 'kind' (e.g. matcher: {kind: includes})")
    for key in ("id", "group", "description", "split", "dataset_path"):
        if key in spec and not isinstance(spec[key], str):
            problems.append(f"{key} must be a string, not {type(spec[key]).__name__}")
    if "tools" in spec and not isinstance(spec["tools"], list):
        problems.append("tools must be a list of {name, description, parameters_json}")
    return problems


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
    runs = {k: tool[k] for k in ("implementation", "replies", "parallel", "timeout_s") if k in tool}
    return {
        "name": tool["name"],
        "description": tool["description"],
        "parameters_json": json.dumps(parsed, separators=(",", ":")),
        **runs,
    }


def _parse_json(text: Any, where: str) -> Any:
    try:
        return strictjson.loads(text)
    except (TypeError, ValueError) as exc:
        raise EvalHydraError(f"{where}: invalid JSON ({exc}).",
                             'Write a JSON object, e.g. {"type": "object"}.') from None
