"""OpenAI Evals API definitions as registry evals: an eval object and its runs, turned into files.

An eval object (``client.evals.retrieve``) holds the graders (``testing_criteria``);
each run object (``client.evals.runs.retrieve``) holds what to send: its
``data_source`` (``completions`` or ``responses``) with ``input_messages`` (a template over the
``item`` namespace, or an ``item_reference`` to a conversation in the item), the
``model``, ``sampling_params`` and the items (``source``: ``file_content``, or a
``file_id`` whose JSONL the user kept). One registry eval is written per run: its
dataset has one line per item, holding the messages rendered as OpenAI renders
them and the item itself (the graders' ``item`` namespace); its matcher is
``openai_graders`` with the criteria unchanged. Without a run, the items come from
a JSONL file and each item's ``input`` (or another ``item_reference``) is sent.

Anything evalhydra cannot run the same way is refused with its JSON path
(``RUN.json: $.data_source.source.type: …``): stored-completions sources, image or
audio content. A ``responses`` run imports as a completions one does, onto ``service.api=responses``;
a ``jsonl`` run's rows keep their ``sample`` (the output), graded by ``service=recorded``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError, did_you_mean
from evalhydra.core.openai_templates import ROLES, SAMPLING_PARAMS, TemplateError, render, resolve, text_parts
from evalhydra.core.untrusted_schema import schema_errors, untrusted_validator

__all__ = ["ImportedEval", "RunSource", "convert", "read_object", "write_registry"]

#: A run's sampling parameters, and the request field each becomes (a grader's, and the reply's format).
_SAMPLING = {**SAMPLING_PARAMS, "response_format": "response_format"}


@dataclass
class RunSource:
    """Where one registry eval's cases come from: a run object, or (no run) a JSONL of items."""

    where: str
    run: Mapping[str, Any] | None = None
    items_path: Path | None = None
    input_reference: str = "item.input"


@dataclass
class ImportedEval:
    """One registry eval to write: its definition and its dataset's lines."""

    eval_id: str
    spec: dict[str, Any]
    lines: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    api: str = "chat"  # the API the run was sampled through (service.api)
    recorded: bool = False  # every line holds its output already: graded with service=recorded


def read_object(path: Path) -> Mapping[str, Any]:
    """A JSON object from ``path`` (an SDK object's ``model_dump``, or the API's JSON)."""
    try:
        value = strictjson.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EvalHydraError(f"{path}: cannot be read ({exc.strerror}).") from None
    except ValueError as exc:
        raise EvalHydraError(f"{path}: invalid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise EvalHydraError(f"{path}: $ must be a JSON object (an eval or run object).")
    return value


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:48] or "eval"


def convert(eval_obj: Mapping[str, Any], sources: Sequence[RunSource], *, where: str,
            judge_service: str | None, files: Mapping[str, Path]) -> list[ImportedEval]:
    """The registry evals of ``eval_obj``, one per source.

    Args:
        eval_obj: The eval object.
        sources: Its runs (or one item file).
        where: The eval file's name, for errors.
        judge_service: The service that answers model graders (None: none needed).
        files: Local JSONL files of ``file_id`` sources, by file id.

    Raises:
        EvalHydraError: ``FILE: $.path: what cannot be imported, and the fix``.
    """
    if eval_obj.get("object", "eval") != "eval":
        raise EvalHydraError(f"{where}: $.object: {eval_obj.get('object')!r}: this is not an eval object.",
                             "Pass client.evals.retrieve(EVAL_ID).model_dump() first, then its runs.")
    criteria = eval_obj.get("testing_criteria")
    if not isinstance(criteria, list) or not criteria:
        raise EvalHydraError(f"{where}: $.testing_criteria: the eval has no graders.")
    base = _slug(str(eval_obj.get("name") or eval_obj.get("id") or "eval"))
    matcher: dict[str, Any] = {"kind": "openai_graders", "testing_criteria": [dict(c) for c in criteria]}
    if judge_service:
        matcher["judge_service"] = judge_service
    out = []
    for index, source in enumerate(sources):
        suffix = "" if len(sources) == 1 else "." + _slug(str((source.run or {}).get("name")
                                                             or (source.run or {}).get("id") or index + 1))
        eval_id = f"openai.{base}{suffix}"
        imported = ImportedEval(eval_id, _spec(eval_obj, eval_id, matcher, source))
        imported.lines = _lines(source, files)
        data_source = (source.run or {}).get("data_source", {})
        imported.model = data_source.get("model")
        imported.api = "responses" if data_source.get("type") == "responses" else "chat"
        imported.recorded = all("sample" in line for line in imported.lines)
        _check_items(eval_obj, imported.lines, where)
        _check_grader_fields(criteria, imported.lines, where)
        out.append(imported)
    return out


def _item_schema(eval_obj: Mapping[str, Any]) -> Any:
    """The eval's item schema: ``data_source_config.item_schema``, or the ``item`` property of the
    ``schema`` the API returns (None: none given)."""
    config = eval_obj.get("data_source_config")
    if not isinstance(config, Mapping):
        return None
    if isinstance(config.get("item_schema"), Mapping):
        return config["item_schema"]
    schema = config.get("schema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties.get("item") if isinstance(properties, Mapping) else None


def _check_items(eval_obj: Mapping[str, Any], lines: Sequence[Mapping[str, Any]], where: str) -> None:
    """Every item must fit the eval's item schema, as OpenAI checks them when a run starts.

    Raises:
        EvalHydraError: Naming the first item that does not, the field, and what is wrong.
    """
    schema = _item_schema(eval_obj)
    if not isinstance(schema, Mapping):
        return
    try:
        validator = untrusted_validator(schema)
    except jsonschema.SchemaError as exc:
        raise EvalHydraError(f"{where}: $.data_source_config: the item schema is no JSON schema: "
                             f"{exc.message}.") from None
    for number, line in enumerate(lines, start=1):
        problem = next(iter(sorted(schema_errors(validator, line["item"]), key=lambda e: list(e.path))), None)
        if problem is not None:
            field_path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in problem.path)
            raise EvalHydraError(f"{where}: item {number} ({line['id']}){field_path}: {problem.message}.",
                                 "Fix the item, or the eval's data_source_config item schema.")


#: A grader template's reference to an item field: ``{{ item.a.b }}`` → ``a``.
_ITEM_FIELD = re.compile(r"\{\{\s*item\.([A-Za-z_][A-Za-z0-9_\-]*)")


def _check_grader_fields(criteria: Sequence[Any], lines: Sequence[Mapping[str, Any]], where: str) -> None:
    """A grader template must name a field some item has (a field no item has is a typo; one some
    items lack errors that grader on those items, as OpenAI's does).

    Raises:
        EvalHydraError: Naming the criterion, the field, and the fields the items have.
    """
    present = {key for line in lines if isinstance(line["item"], Mapping) for key in line["item"]}
    for index, grader in enumerate(criteria):
        for name in sorted(set(_ITEM_FIELD.findall(json.dumps(grader)))):
            if name not in present:
                label = grader.get("name") if isinstance(grader, Mapping) else index
                raise EvalHydraError(
                    f"{where}: $.testing_criteria[{index}] ('{label}'): {{{{item.{name}}}}}: no item has "
                    f"a field '{name}'.", did_you_mean(name, sorted(present)))


def _spec(eval_obj: Mapping[str, Any], eval_id: str, matcher: dict[str, Any],
          source: RunSource) -> dict[str, Any]:
    run = source.run or {}
    data_source = run.get("data_source") or {}
    origin = f"OpenAI Evals eval {eval_obj.get('id', '?')}"
    origin += f", run {run.get('id')}" if run.get("id") else ""
    model = data_source.get("model")
    spec: dict[str, Any] = {
        "id": eval_id, "group": "openai",
        "description": f"{eval_obj.get('name') or eval_id} ({origin}{f'; model {model}' if model else ''})",
        "dataset_path": f"data/openai/{eval_id.removeprefix('openai.')}/test.jsonl", "split": "test",
        "matcher": matcher, "default_run_count": 1,
    }
    params, tools = _sampling(data_source.get("sampling_params"),
                              f"{source.where}: $.data_source.sampling_params")
    if params:
        spec["params"] = params
    if params.get("response_format"):  # OpenAI fills sample.output_json only for such a run
        spec["matcher"] = {**matcher, "output_json": True}
    if tools:
        spec["tools"] = tools
    return spec


def _sampling(value: Any, where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if value is None:
        return {}, []
    if not isinstance(value, Mapping):
        raise EvalHydraError(f"{where}: must be an object.")
    params, tools = {}, []
    for key, setting in value.items():
        if setting is None:
            continue
        if key == "tools":
            tools = [_tool(tool, f"{where}.tools[{i}]") for i, tool in enumerate(setting)]
        elif key == "text" and isinstance(setting, Mapping) and isinstance(setting.get("format"), Mapping):
            params["response_format"] = _chat_format(setting["format"])  # a responses run's structured output
        elif key in _SAMPLING:
            params[_SAMPLING[key]] = setting
        else:
            raise EvalHydraError(f"{where}.{key}: not a sampling parameter evalhydra sends.",
                                 f"Use: {', '.join(_SAMPLING)}, tools.")
    return params, tools


def _chat_format(text_format: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses ``text.format`` as chat's ``response_format`` (sent back as ``text.format``)."""
    if text_format.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {k: v for k, v in text_format.items() if k != "type"}}
    return dict(text_format)


def _tool(tool: Any, where: str) -> dict[str, Any]:
    if isinstance(tool, Mapping) and tool.get("type") == "function" and "function" not in tool:
        tool = {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}  # responses'
    function = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping) or not function.get("name"):
        raise EvalHydraError(f"{where}: a tool must be {{type: function, function: {{name, parameters}}}}.")
    return {"name": function["name"], "description": function.get("description") or "",
            "parameters_json": json.dumps(function.get("parameters") or {"type": "object"})}


def _lines(source: RunSource, files: Mapping[str, Path]) -> list[dict[str, Any]]:
    if source.run is None:
        assert source.items_path is not None
        rows = _jsonl_items(source.items_path, source.items_path.name)
        recorded = all(sample is not None for _, sample in rows)  # outputs produced already
        return [_line(item, n, _referenced(source.input_reference, item, f"{source.items_path}:{n}")
                      if not recorded else _as_input(item), sample)
                for n, (item, sample) in enumerate(rows, start=1)]
    where = f"{source.where}: $.data_source"
    data_source = source.run.get("data_source")
    kind = data_source.get("type") if isinstance(data_source, Mapping) else None
    if kind not in ("completions", "responses", "jsonl"):
        raise EvalHydraError(f"{where}.type: {kind!r} is not imported.",
                             "Export a run whose data_source.type is completions, responses or jsonl.")
    assert isinstance(data_source, Mapping)
    rows = _source_items(data_source.get("source"), f"{where}.source", files)
    if kind == "jsonl":  # the outputs are in the rows: graded as recorded (service=recorded)
        missing = next((n for n, (_, sample) in enumerate(rows, start=1) if sample is None), None)
        if missing is not None:
            raise EvalHydraError(f"{where}.source: row {missing} has no 'sample': a jsonl run's rows are"
                                 " {item, sample}.", "Export the run's rows with their samples.")
        return [_line(item, n, _as_input(item), sample) for n, (item, sample) in enumerate(rows, start=1)]
    messages = data_source.get("input_messages") or {"type": "item_reference", "item_reference": "item.input"}
    return [_line(item, n, _messages(messages, item, f"{where}.input_messages", n))
            for n, (item, _) in enumerate(rows, start=1)]


def _as_input(item: Any) -> Any:
    """What a recorded case lists as its input: the item's ``input``, else the item as JSON."""
    given = item.get("input") if isinstance(item, Mapping) else None
    return given if isinstance(given, str | list) and given else json.dumps(item, ensure_ascii=False)


def _line(item: Any, number: int, messages: Any, sample: Any = None) -> dict[str, Any]:
    given = item.get("id") if isinstance(item, Mapping) else None
    case_id = given if isinstance(given, str) and given.strip() else f"item-{number}"
    line = {"id": case_id, "input": messages, "item": item}
    if sample is not None:
        line["sample"] = sample
    return line


def _source_items(source: Any, where: str, files: Mapping[str, Path]) -> list[tuple[Any, Any]]:
    kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "file_content":
        content = source.get("content")
        if not isinstance(content, list) or not content:
            raise EvalHydraError(f"{where}.content: must be a non-empty list of {{item: …}} rows.")
        return [_item(row, f"{where}.content[{i}]") for i, row in enumerate(content)]
    if kind == "file_id":
        file_id = str(source.get("id"))
        path = files.get(file_id)
        if path is None:
            raise EvalHydraError(f"{where}.id: the items of file {file_id} are not here.",
                                 f"Download it (client.files.content('{file_id}')) and pass "
                                 f"--file {file_id}=PATH.jsonl, or save it as {file_id}.jsonl beside"
                                 " the run.")
        return _jsonl_items(path, str(path))
    raise EvalHydraError(f"{where}.type: {kind!r} sources are not imported (only file_content and file_id).",
                         "Export the items to a JSONL file and pass it as a file_id source's file.")


def _item(row: Any, where: str) -> tuple[Any, Any]:
    """A row's item and its recorded sample (None without one)."""
    if not isinstance(row, Mapping) or "item" not in row:
        raise EvalHydraError(f"{where}: a row must be an object with an 'item'.")
    return row["item"], row.get("sample")


def _jsonl_items(path: Path, where: str) -> list[tuple[Any, Any]]:
    """The items of a JSONL file, each with its recorded sample (or None): each line ``{"item": {…}}``
    or ``{"item", "sample"}`` (as OpenAI's files hold them), or the item itself."""
    items = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise EvalHydraError(f"{path}: cannot be read ({exc.strerror}).") from None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            row = strictjson.loads(text)
        except ValueError as exc:
            raise EvalHydraError(f"{where}:{number}: invalid JSON: {exc}.") from None
        wrapped = isinstance(row, Mapping) and set(row) <= {"item", "sample"} and "item" in row
        items.append((row["item"], row.get("sample")) if wrapped else (row, None))
    if not items:
        raise EvalHydraError(f"{where}: no items.")
    return items


def _messages(spec: Any, item: Any, where: str, number: int) -> list[dict[str, Any]]:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if kind == "item_reference":
        return _referenced(str(spec.get("item_reference")), item, f"{where}.item_reference (item {number})")
    if kind != "template" or not isinstance(spec.get("template"), list):
        raise EvalHydraError(f"{where}.type: {kind!r}: must be a template or an item_reference.")
    rendered = []
    for index, message in enumerate(spec["template"]):
        here = f"{where}.template[{index}]"
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in ROLES:
            raise EvalHydraError(f"{here}.role: {role!r}: must be user, assistant, system or developer.")
        rendered.append({"role": ROLES[role], "content": _content(message.get("content"), item, here)})
    return rendered


def _content(content: Any, item: Any, where: str) -> str:
    try:
        return "".join(render(text, {"item": item}) for text in text_parts(content, where))
    except TemplateError as exc:
        raise EvalHydraError(f"{where}.content: {exc}.",
                             "Every {{item.x}} must name a field each item has.") from None


def _referenced(reference: str, item: Any, where: str) -> list[dict[str, Any]]:
    """The conversation an ``item_reference`` names (a string becomes one user message)."""
    try:
        value = resolve(reference, {"item": item})
    except TemplateError as exc:
        raise EvalHydraError(f"{where}: {exc}.", "Name a field every item has, e.g. item.input.") from None
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not all(isinstance(m, Mapping) and m.get("role") in ROLES
                                              and isinstance(m.get("content"), str) for m in value):
        raise EvalHydraError(f"{where}: {reference} must be a string or a list of"
                             " {role, content} messages.")
    return [{"role": ROLES[m["role"]], "content": m["content"]} for m in value]


def write_registry(out: Path, imported: Sequence[ImportedEval], *, force: bool) -> list[Path]:
    """Write each eval's definition and dataset under ``out``; returns the files written.

    Raises:
        EvalHydraError: A file exists (without ``force``).
    """
    written = []
    for item in imported:
        definition = out / "evals" / "openai" / f"{item.eval_id.removeprefix('openai.')}.json"
        dataset = out / item.spec["dataset_path"]
        for path in (definition, dataset):
            if path.exists() and not force:
                raise EvalHydraError(f"{path}: exists already.",
                                     "Pass --force to write over it, or another --out.")
        definition.parent.mkdir(parents=True, exist_ok=True)
        dataset.parent.mkdir(parents=True, exist_ok=True)
        definition.write_text(json.dumps(item.spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        dataset.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in item.lines),
                           encoding="utf-8")
        written += [definition, dataset]
    return written
