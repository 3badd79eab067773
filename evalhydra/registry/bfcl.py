"""Berkeley Function-Calling Leaderboard (BFCL) files as datasets.

A BFCL line (``{"id", "question": [[messages]], "function": [functions]}``) becomes a case
whose input is the question's messages, whose ``tools`` are its functions (their schemas in
JSON Schema: BFCL's ``dict`` is ``object``, ``float`` ``number``, ``tuple`` ``array``, ``any``
no type), and whose ideal is the line's ground truth (``[{function: {parameter: [acceptable
values]}}]``, as JSON, for the ``bfcl_ast`` matcher). The ground truth is the line's own
``ground_truth``, or the line of the same id in BFCL's possible-answer file: the file of the
same name in a ``possible_answer`` folder beside the dataset, or beside its folder (BFCL's
layout). Single-turn categories only: a question of several turns is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalhydra.core import strictjson
from evalhydra.core.errors import EvalHydraError
from evalhydra.core.toolnames import openai_name

__all__ = ["answers_beside", "bfcl_record", "is_bfcl"]

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "int": "integer",
          "str": "string", "bool": "boolean"}


def is_bfcl(record: Any) -> bool:
    """Whether a dataset line is in BFCL's shape."""
    return (isinstance(record, dict) and "question" in record and "function" in record
            and "input" not in record)


def answers_beside(dataset: Path) -> dict[str, Any]:
    """The ground truth by case id from BFCL's possible-answer file for ``dataset`` ({} if none)."""
    for folder in (dataset.parent / "possible_answer", dataset.parent.parent / "possible_answer"):
        path = folder / dataset.name
        if path.is_file():
            return {entry["id"]: entry.get("ground_truth") for _, entry in strictjson.json_lines(path)
                    if isinstance(entry, dict) and isinstance(entry.get("id"), str)}
    return {}


def bfcl_record(record: dict[str, Any], answers: dict[str, Any], where: str) -> dict[str, Any]:
    """A BFCL line as an evalhydra dataset line (``input``, ``tools``, ``ideal``).

    Raises:
        EvalHydraError: A question of several turns, or functions that are not a list of objects.
    """
    question = record["question"]
    turns = question if isinstance(question, list) else []
    if len(turns) != 1 or not isinstance(turns[0], list) or not turns[0]:
        raise EvalHydraError(f"{where}: a BFCL question of {len(turns)} turns: only single-turn categories"
                             " load as cases.", "Use BFCL's single-turn files (simple, multiple, parallel).")
    functions = record["function"]
    if not isinstance(functions, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str)
                                                  and f["name"] for f in functions):
        raise EvalHydraError(f"{where}: 'function' must be a list of functions with names (text).")
    out: dict[str, Any] = {k: v for k, v in record.items()
                           if k not in ("question", "function", "ground_truth")}
    names: dict[str, str] = {}
    for function in functions:  # BFCL's dotted names (math.factorial) as the API takes them
        names[str(function["name"])] = openai_name("bfcl", str(function["name"]), set(names.values()))
    out["input"] = turns[0]
    out["tools"] = [{"name": names[f["name"]], "description": f.get("description") or "",
                     "parameters": json_schema(f.get("parameters") or {"type": "dict", "properties": {}})}
                    for f in functions]
    renamed = {new: old for old, new in names.items() if new != old}
    if renamed:
        out["bfcl_names"] = renamed  # kept with the case: the names as BFCL has them
    truth = record.get("ground_truth", answers.get(str(record.get("id"))))
    if truth is not None:
        out["ideal"] = json.dumps(_renamed(truth, names), ensure_ascii=False)
    return out


def _renamed(truth: Any, names: dict[str, str]) -> Any:
    """The ground truth with its functions under the names offered."""
    if not isinstance(truth, list):
        return truth
    return [{names.get(k, k): v for k, v in call.items()} if isinstance(call, dict) else call
            for call in truth]


def json_schema(schema: Any) -> Any:
    """BFCL's parameter schema in JSON Schema's type names, recursively."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: json_schema(v) for k, v in schema.items()}
    kind = schema.get("type")
    if kind == "any":
        out.pop("type")
    elif isinstance(kind, str):
        out["type"] = _TYPES.get(kind, kind)
    return out
