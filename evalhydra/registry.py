"""Load a zig_eval-layout registry: ``services.json``, ``evals/**``, ``data/``, ``assets/``.

Field names, required fields, defaults and validation follow zig_eval: strings
are trimmed, an empty required string is an error, an empty optional string is
None, unknown eval keys are ignored. Datasets are streamed line by line.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from evalhydra.errors import EvalHydraError, did_you_mean
from evalhydra.types import Attachment, Case, ExpectedToolCall

__all__ = [
    "Registry",
    "default_registry_root",
    "iter_cases",
    "load_registry",
    "resolve_registry_root",
]

MAX_DEFINITION_BYTES = 1 << 20
MAX_DATASET_BYTES = 8 << 20
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
EVAL_KEYS = REQUIRED_EVAL_FIELDS + ("service_allowlist", "tools", "max_attempts", "cases")
SERVICE_KEYS = (
    "name",
    "kind",
    "base_url",
    "default_model",
    "model",
    "timeout_ms",
    "deadline_ms",
    "api_key_env",
    "provider",
    "system_prompt",
    "retry",
    "max_concurrency",
    "headers",
    "params",
    "rate_limit",
    "pricing",
    "mock",
    "cli_name",
    "env_prefix",
    "timeout_s",
    "honor_verification_marker",
    "template",
    "argv",
)


def default_registry_root() -> Path:
    """The registry that ships with the package (the repo's ``registry/``)."""
    import evalhydra.registry_data as data

    return Path(next(iter(data.__path__)))


def resolve_registry_root(value: str | os.PathLike[str] | None) -> Path:
    """Turn the ``registry`` config value into an absolute directory.

    ``registry`` (the default) means ``./registry`` when it exists, else the
    packaged example registry, so ``python -m evalhydra`` works from anywhere.

    Raises:
        EvalHydraError: The directory does not exist.
    """
    text = str(value or "registry")
    path = Path(text).expanduser()
    if path.is_dir():
        return path.resolve()
    if text.rstrip("/") == "registry":
        return default_registry_root().resolve()
    raise EvalHydraError(
        f"registry={text}: no such directory.",
        "Point registry= at a folder with services.json, evals/ and data/.",
    )


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
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix in (".yaml", ".yml"):
            return yaml.safe_load(text)
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalHydraError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise EvalHydraError(f"{path}{line}: invalid YAML: {exc}.") from None


def _clean(value: Any) -> Any:
    """Trim strings recursively; an empty string becomes None."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _require(spec: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    for name in fields:
        if spec.get(name) is None:
            raise EvalHydraError(f"{where}: required field '{name}' is missing or empty.")


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
    spec = {k: v for k, v in _clean(item).items() if k in SERVICE_KEYS and v is not None}
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
    spec["tools"] = [_tool_spec(t, f"{where}: tools[{i}]") for i, t in enumerate(spec.get("tools") or [])]
    if not is_agent:
        _dataset_file(root, spec["dataset_path"], where)
    spec["source"] = where
    return spec


def _tool_spec(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict):
        raise EvalHydraError(f"{where}: must be an object.")
    _require(tool, ("name",), where)
    params = tool.get("parameters_json") or "{}"
    parsed = params if isinstance(params, dict) else _parse_json(params, f"{where}.parameters_json")
    if not isinstance(parsed, dict):
        raise EvalHydraError(f"{where}.parameters_json must be a JSON object.")
    return {
        "name": tool["name"],
        "description": tool.get("description") or "",
        "parameters_json": json.dumps(parsed, separators=(",", ":")),
    }


def _parse_json(text: Any, where: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise EvalHydraError(f"{where}: invalid JSON ({exc}).") from None


def _dataset_file(root: Path, rel: str, where: str) -> Path:
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise EvalHydraError(f"{where}: dataset_path '{rel}' escapes the registry root.")
    if not path.is_file():
        raise EvalHydraError(
            f"{where}: dataset file not found: {path}.",
            "dataset_path is relative to the registry root, e.g. data/<group>/<eval>/test.jsonl.",
        )
    if path.stat().st_size > MAX_DATASET_BYTES:
        raise EvalHydraError(f"{path}: dataset larger than 8 MiB.")
    return path


def iter_cases(root: Path, dataset_path: str, *, check_attachments: bool = True) -> Iterator[Case]:
    """Stream a JSONL dataset, one validated :class:`Case` per non-blank line.

    Raises:
        EvalHydraError: ``path:line: what is wrong`` for the first bad line, or a
            duplicate case id.
    """
    path = _dataset_file(root, dataset_path, f"{root}")
    seen: set[str] = set()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.strip()
            if not line:
                continue
            case = _parse_case(line, root, f"{path}:{number}", number, check_attachments)
            if case.id in seen:
                raise EvalHydraError(f"{path}:{number}: duplicate case id '{case.id}'.")
            seen.add(case.id)
            yield case


def _parse_case(line: bytes, root: Path, where: str, number: int, check: bool) -> Case:
    try:
        raw = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EvalHydraError(f"{where}: invalid JSON: {exc}.") from None
    if not isinstance(raw, dict):
        raise EvalHydraError(f"{where}: each line must be a JSON object.")
    case_id = raw.get("id")
    if isinstance(case_id, int) and not isinstance(case_id, bool):
        case_id = str(case_id)
    if not isinstance(case_id, str) or not case_id.strip():
        raise EvalHydraError(f"{where}: 'id' is required and must be a non-empty string.")
    if raw.get("input") is None or (isinstance(raw["input"], str) and not raw["input"].strip()):
        raise EvalHydraError(f"{where}: 'input' is required.")
    ideal = raw.get("ideal")
    if ideal is not None and not isinstance(ideal, str):
        raise EvalHydraError(f"{where}: 'ideal' must be a string.")
    return Case(
        id=case_id.strip(),
        input=raw["input"].strip() if isinstance(raw["input"], str) else raw["input"],
        ideal=(ideal.strip() or None) if ideal else None,
        expected_tool_calls=_expected_calls(raw.get("expected_tool_calls"), where),
        attachments=_attachments(raw.get("attachments"), root, where, check),
        expected=raw.get("expected"),
        tags=tuple(str(t) for t in raw.get("tags") or ()),
        content_hash=hashlib.sha256(line).hexdigest()[:16],
        line=number,
    )


def _expected_calls(value: Any, where: str) -> tuple[ExpectedToolCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise EvalHydraError(f"{where}: 'expected_tool_calls' must be a non-empty array.")
    calls = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not str(item.get("name") or "").strip():
            raise EvalHydraError(f"{where}: expected_tool_calls[{i}] needs a 'name'.")
        args = item.get("arguments_json")
        if args is not None and not isinstance(args, str):
            args = json.dumps(args)
        calls.append(ExpectedToolCall(name=item["name"].strip(), arguments_json=args))
    return tuple(calls)


def _attachments(value: Any, root: Path, where: str, check: bool) -> tuple[Attachment, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise EvalHydraError(f"{where}: 'attachments' must be an array.")
    from evalhydra.services.render import attachment_mime, check_attachment_path

    out = []
    for i, item in enumerate(value):
        spot = f"{where}: attachments[{i}]"
        if not isinstance(item, dict) or item.get("kind") not in ("image", "file"):
            raise EvalHydraError(f"{spot}: needs kind 'image' or 'file' and a path.")
        rel = str(item.get("path") or "")
        try:
            if check:
                check_attachment_path(root, rel)
            label = (item.get("label") or "").strip() or None
            draft = Attachment(
                kind=item["kind"], path=rel, mime_type=(item.get("mime_type") or "").strip(), label=label
            )
            out.append(Attachment(kind=draft.kind, path=rel, mime_type=attachment_mime(draft), label=label))
        except EvalHydraError as exc:
            raise EvalHydraError(f"{spot}: {exc.message}", exc.hint) from None
    return tuple(out)
