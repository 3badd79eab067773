"""Datasets: zig_eval JSONL streamed line by line into validated :class:`~evalhydra.types.Case` objects.

Strings are trimmed, an empty required string is an error, and every bad line
is reported as ``path:line: what is wrong``. Attachments are checked for path
safety, size and type as each line is read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalhydra.errors import EvalHydraError
from evalhydra.registry.attachments import attachment_mime, check_attachment_path
from evalhydra.types import Attachment, Case, ExpectedToolCall

__all__ = ["MAX_DATASET_BYTES", "dataset_file", "iter_cases"]

MAX_DATASET_BYTES = 8 << 20


def dataset_file(root: Path, rel: str, where: str) -> Path:
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
    path = dataset_file(root, dataset_path, f"{root}")
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
