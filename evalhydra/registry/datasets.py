"""Datasets: zig_eval JSONL, OpenAI-evals JSONL and CSV, streamed into validated cases.

Strings are trimmed, an empty required string is an error, and every bad line
is reported as ``path:line: what is wrong``. Attachments are checked for path
safety, size and type as each line is read.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.messages import MessageError, check_messages, fill, is_conversation
from evalhydra.core.values import Attachment, Case, ExpectedToolCall, ToolSpec
from evalhydra.registry.attachments import attachment_mime, check_attachment_path, check_text
from evalhydra.registry.bfcl import answers_beside, bfcl_record, is_bfcl
from evalhydra.registry.tau2 import is_task_file, task_records

__all__ = ["DATASET_FIELDS", "MAX_CASE_BYTES", "CaseTemplate", "dataset_file", "iter_cases", "locate_file"]

#: The longest line (one case) of a JSONL dataset. A dataset is read a line at a time, so its
#: size is bounded by the disk, not memory; only a line is held whole.
MAX_CASE_BYTES = 8 << 20
#: The fields of a dataset line the loader reads (any other field is kept for templates).
DATASET_FIELDS = ("id", "input", "ideal", "expected_tool_calls", "attachments", "tags", "expected", "item",
                  "sample", "tools", "user")
#: What loading trims, as zig_eval does: space, tab, CR and LF (not NO-BREAK SPACE or other
#: Unicode spaces, which can be part of an answer).
WHITESPACE = " \t\r\n"


def dataset_file(root: Path, rel: str, where: str, base: Path | None = None) -> Path:
    """The dataset file ``rel`` names, checked.

    Args:
        root: The registry root.
        rel: The ``dataset_path`` as written.
        where: The file that names it, for errors.
        base: The folder of that file when it is in evalhydra's own format (a YAML eval, a
            ``--config-dir`` eval): an absolute path is allowed, and a relative one is tried
            there first. None for a zig_eval eval: relative to the registry root only.

    Raises:
        EvalHydraError: The path escapes the registry or is missing.
    """
    return locate_file(root, rel, base, where=where, what="dataset")


def locate_file(root: Path, rel: str, base: Path | None, *, where: str, what: str) -> Path:
    """Resolve a path an eval file names: absolute as written (own formats only), else against
    ``base`` (the naming file's folder) when the file is there, else against the registry root.
    A relative path named inside the registry must stay inside it.

    Raises:
        EvalHydraError: Escaping the registry, or not found (naming every place tried).
    """
    real_root = root.resolve()
    written = Path(rel).expanduser()
    inside = base is None or base.resolve().is_relative_to(real_root)
    if written.is_absolute():
        if base is None:
            raise EvalHydraError(f"{where}: {what}_path '{rel}' is absolute; zig_eval paths are relative to "
                                 "the registry root.", _INSIDE_HINT)
        candidates = [written.resolve()]
    else:
        candidates = [(b / rel).resolve() for b in dict.fromkeys(
            [*([base.resolve()] if base is not None else []), real_root])]
        if inside and not any(c.is_relative_to(real_root) for c in candidates):
            raise EvalHydraError(f"{where}: {what}_path '{rel}' escapes the registry root.", _INSIDE_HINT)
    for path in candidates:
        if path.is_file() and (written.is_absolute() or not inside or path.is_relative_to(real_root)):
            return path
    tried = " or ".join(str(c) for c in candidates)
    hint = (f"{what}_path is relative to the file that names it ({base}), or to the registry root."
            if base is not None else f"{what}_path is relative to the registry root, e.g. "
                                     "data/<group>/<eval>/test.jsonl.")
    raise EvalHydraError(f"{where}: {what} file not found: {tried}.", hint)


_INSIDE_HINT = "Give a path inside the registry, e.g. data/<group>/<eval>/test.jsonl."


@dataclass(frozen=True)
class CaseTemplate:
    """An eval's prompt template, filled from each case's fields (:func:`evalhydra.core.messages.fill`).

    Attributes:
        prompt: A string template: the case's input becomes the filled string.
        messages: A conversation template: the case's input becomes the filled messages.
    """

    prompt: str | None = None
    messages: Any = None

    def __bool__(self) -> bool:
        return self.prompt is not None or self.messages is not None

    def apply(self, fields: dict[str, Any]) -> Any:
        """The case input this template makes from ``fields``."""
        return fill(self.prompt if self.prompt is not None else self.messages, fields)


def iter_cases(root: Path, dataset_path: str, *, check_attachments: bool = True,
               template: CaseTemplate | None = None, base: Path | None = None) -> Iterator[Case]:
    """Stream a dataset, one validated :class:`Case` per record.

    Formats, by file name: ``.csv`` (a header row names the fields; one case per row;
    ``id`` defaults to the row number), a ``.json`` array of τ²-bench tasks
    (:mod:`evalhydra.registry.tau2`), else JSONL: zig_eval lines, or OpenAI-evals
    samples (``{"input": [messages], "ideal": str | [str]}``, ``id`` defaulting to the
    line number). With a ``template``, each case's input is the template filled from
    the record's fields. ``base`` is the folder of the eval file that names the dataset
    (:func:`dataset_file`); attachments resolve against the dataset's own folder first.

    Raises:
        EvalHydraError: ``path:line: what is wrong`` for the first bad record, or a
            duplicate case id.
    """
    path = dataset_file(root, dataset_path, f"{root}", base=base)
    seen: set[str] = set()
    records = (_csv_records(path) if path.suffix.lower() == ".csv"
               else task_records(path) if is_task_file(path) else _bfcl_lines(path, _jsonl_records(path)))
    roots = _attachment_root(root, path)  # once per dataset: resolving a path costs system calls
    for number, raw, content_hash, numbered_id in records:
        where = f"{path}:{number}"
        case = _parse_case(raw, roots, where, number, check_attachments, template, content_hash, numbered_id)
        if case.id in seen:
            raise EvalHydraError(f"{where}: duplicate case id '{case.id}'.",
                                 "Case ids must be unique within a dataset; rename one of them.")
        seen.add(case.id)
        yield case
    if not seen:
        raise EvalHydraError(f"{path}: the dataset has no cases.",
                             'Add one case per line, e.g. {"id": "case-1", "input": "...", "ideal": "..."}.')


def _attachment_root(root: Path, dataset: Path) -> tuple[Path, Path | None]:
    """Where a dataset's attachment paths resolve: (its own folder, the registry root when the
    dataset is inside it, else None).

    A dataset inside the registry resolves them against its folder, then the registry root, and
    they stay in the registry; one outside it (a ``--config-dir`` eval's) keeps them in its folder."""
    real_root = root.resolve()
    return dataset.parent, (real_root if dataset.is_relative_to(real_root) else None)


Record = tuple[int, Any, str, bool]  # line number, parsed record, content hash, id may default


def _bfcl_lines(path: Path, records: Iterator[Record]) -> Iterator[Record]:
    """BFCL lines as dataset lines (:mod:`evalhydra.registry.bfcl`); others as they are."""
    answers: dict[str, Any] | None = None
    for number, raw, content_hash, numbered_id in records:
        if is_bfcl(raw):
            answers = answers_beside(path) if answers is None else answers
            raw = bfcl_record(raw, answers, f"{path}:{number}")
        yield number, raw, content_hash, numbered_id


def _jsonl_records(path: Path) -> Iterator[Record]:
    with path.open("rb") as handle:
        for number, raw in enumerate(iter(partial(handle.readline, MAX_CASE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_CASE_BYTES:
                raise EvalHydraError(f"{path}:{number}: a case line longer than 8 MiB.",
                                     "Put a large input in a file the case attaches (attachments).")
            line = raw.strip(b" \t\r\n")
            if not line:
                continue
            try:
                record = strictjson.loads(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise EvalHydraError(f"{path}:{number}: not UTF-8 text (byte {exc.start} of the line).",
                                     "Save the dataset as UTF-8.") from None
            except ValueError as exc:  # JSON syntax, a repeated key, a lone surrogate escape
                raise EvalHydraError(f"{path}:{number}: invalid JSON: {exc}.",
                                     "Each line is one JSON object: fix a missing comma, quote or "
                                     "bracket, or a key written twice.") from None
            openai_sample = isinstance(record, dict) and is_conversation(record.get("input"))
            yield number, record, hashlib.sha256(line).hexdigest()[:16], openai_sample


def _csv_records(path: Path) -> Iterator[Record]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            for row in reader:
                where = f"{path}:{reader.line_num}"
                if None in row or None in row.values():
                    raise EvalHydraError(f"{where}: the row has another number of fields than the header.")
                text = json.dumps(row, sort_keys=True, ensure_ascii=False)
                yield reader.line_num, dict(row), hashlib.sha256(text.encode()).hexdigest()[:16], True
    except UnicodeDecodeError as exc:
        raise EvalHydraError(f"{path}: not UTF-8 text (byte {exc.start}).") from None
    except csv.Error as exc:
        raise EvalHydraError(f"{path}: invalid CSV: {exc}.") from None


def _parse_case(raw: Any, roots: tuple[Path, Path | None], where: str, number: int, check: bool,
                template: CaseTemplate | None, content_hash: str, numbered_id: bool) -> Case:
    if not isinstance(raw, dict):
        raise EvalHydraError(f"{where}: each line must be a JSON object.")
    value = _input(raw, template, where)
    ideal, ideals = _ideal(raw.get("ideal"), where)
    messages = _messages(value, where, isinstance(raw.get("user"), dict)) if is_conversation(value) else None
    return Case(
        id=_case_id(raw.get("id"), number, numbered_id, where),
        input=value.strip(WHITESPACE) if isinstance(value, str) else value,
        ideal=ideal,
        ideals=ideals,
        messages=messages,
        expected_tool_calls=_expected_calls(raw.get("expected_tool_calls"), where),
        attachments=_attachments(raw.get("attachments"), roots, where, check),
        expected=raw.get("expected"),
        item=raw.get("item"),
        sample=raw.get("sample"),
        tags=tuple(str(t) for t in raw.get("tags") or ()),
        tools=_case_tools(raw.get("tools"), where),
        user=_user(raw.get("user"), where),
        content_hash=content_hash,
        line=number,
    )


def _case_tools(value: Any, where: str) -> tuple[ToolSpec, ...]:
    """A case's own tools (``[{name, description, parameters}]``), offered instead of the eval's."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                              and t["name"] for t in value):
        raise EvalHydraError(f"{where}: 'tools' must be a list of {{name, description, parameters}}.")
    tools = []
    for tool in value:
        parameters = tool.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise EvalHydraError(f"{where}: tool '{tool['name']}': 'parameters' must be a JSON schema"
                                 " object.")
        tools.append(ToolSpec(tool["name"], str(tool.get("description") or ""), parameters))
    return tuple(tools)


def _case_id(value: Any, number: int, numbered: bool, where: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):  # zig_eval refuses it too
        raise EvalHydraError(f"{where}: 'id' must be a string, not the number {value}.",
                             f'Quote it: "id": "{value}".')
    if (value is None or value == "") and numbered:
        return str(number)
    if not isinstance(value, str) or not value.strip(WHITESPACE):
        raise EvalHydraError(f"{where}: 'id' is required and must be a non-empty string.")
    return value.strip(WHITESPACE)


def _input(raw: dict[str, Any], template: CaseTemplate | None, where: str) -> Any:
    if template:
        try:
            return template.apply(raw)
        except MessageError as exc:
            hint = "Add the field to every case, or fix the eval's template."
            raise EvalHydraError(f"{where}: {exc}.", hint) from None
    value = raw.get("input")
    if value is None and isinstance(raw.get("user"), dict):
        return ""  # a simulated user's case: the user speaks first
    if value is None or (isinstance(value, str) and not value.strip(WHITESPACE)):
        raise EvalHydraError(f"{where}: 'input' is required.")
    return value


def _user(value: Any, where: str) -> dict[str, Any] | None:
    """A case's simulated user (``{persona, known_info, …, script}``), an object when given."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise EvalHydraError(f"{where}: 'user' must be an object (persona, known_info, unknown_info, "
                             "task_instructions, script, …).")
    return value


def _ideal(value: Any, where: str) -> tuple[str | None, tuple[str, ...]]:
    if value is None:
        return None, ()
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        ideals = tuple(v.strip(WHITESPACE) for v in value if v.strip(WHITESPACE))
        return (ideals[0] if ideals else None), ideals
    if not isinstance(value, str):
        raise EvalHydraError(f"{where}: 'ideal' must be a string (or a list of strings, as in OpenAI evals).")
    return (value.strip(WHITESPACE) or None), ()


def _messages(value: Any, where: str, simulated: bool) -> tuple[dict[str, Any], ...]:
    try:
        return check_messages(value, need_user=not simulated)
    except MessageError as exc:
        raise EvalHydraError(f"{where}: input {exc}.",
                             "See docs/configuration.md, 'Conversations'.") from None


def _expected_calls(value: Any, where: str) -> tuple[ExpectedToolCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise EvalHydraError(f"{where}: 'expected_tool_calls' must be a non-empty array.")
    calls = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not str(item.get("name") or "").strip(WHITESPACE):
            raise EvalHydraError(f"{where}: expected_tool_calls[{i}] needs a 'name'.")
        args = item.get("arguments_json")
        if args is not None and not isinstance(args, str):
            args = json.dumps(args)
        calls.append(ExpectedToolCall(name=item["name"].strip(WHITESPACE), arguments_json=args))
    return tuple(calls)


def _attachments(value: Any, roots: tuple[Path, Path | None], where: str,
                 check: bool) -> tuple[Attachment, ...]:
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
            rel, base = _attachment_place(rel, *roots)
            if check:
                path = check_attachment_path(base, rel)
                if item["kind"] == "file":
                    check_text(rel, path)
            label = (item.get("label") or "").strip(WHITESPACE) or None
            draft = Attachment(
                kind=item["kind"], path=rel, mime_type=(item.get("mime_type") or "").strip(WHITESPACE),
                label=label
            )
            out.append(Attachment(kind=draft.kind, path=rel, mime_type=attachment_mime(draft), label=label,
                                  base=None if roots[1] is not None else str(base)))
        except EvalHydraError as exc:
            raise EvalHydraError(f"{spot}: {exc.message}", exc.hint) from None
    return tuple(out)


def _attachment_place(rel: str, folder: Path, root: Path | None) -> tuple[str, Path]:
    """(path, folder it is relative to) of an attachment. Inside a registry: the file beside the
    dataset (as a registry-relative path) when it is there, else the path as written against the
    registry root. Outside one: the dataset's folder. Unsafe paths are left for the checks to refuse."""
    if root is None:
        return rel, folder
    if not rel or "\x00" in rel or Path(rel).is_absolute() or ".." in rel.replace("\\", "/").split("/"):
        return rel, root
    try:
        beside = (folder / rel).resolve()
        found = folder.resolve() != root and beside.is_file() and beside.is_relative_to(root)
    except (OSError, RuntimeError):  # a name too long, a symlink loop: the checks name the problem
        found = False
    if found:
        return beside.relative_to(root).as_posix(), root
    return rel, root
