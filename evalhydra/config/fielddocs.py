"""The config schema's own field docs, and the config shown with a meaning per option (``--help``).

A field's doc is, in this order: its trailing comment in ``schema.py``, the comment lines right
above it, or its entry in its class docstring's ``Attributes:`` section. Read from the source at
``--help`` time only.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import tokenize
import types
import typing
from functools import cache
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from evalhydra.config import schema

__all__ = ["annotated_config", "field_docs"]

#: Where the comments start, at least: a column that keeps most values readable.
COMMENT_COLUMN = 44
#: Longest value shown whole; a longer one is cut with "…".
VALUE_CHARS = 60


@cache
def field_docs() -> dict[tuple[str, str], str]:
    """(class name, field name) -> its one-line doc, for every dataclass in the schema."""
    source = inspect.getsource(schema)
    comments = _comments(source)
    lines = source.splitlines()
    docs: dict[tuple[str, str], str] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        attributes = _attributes(ast.get_docstring(node) or "")
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                name = statement.target.id
                doc = (_trailing(comments, statement) or _above(lines, comments, statement.lineno)
                       or attributes.get(name, ""))
                if doc:
                    docs[(node.name, name)] = doc
    return docs


def _comments(source: str) -> dict[int, str]:
    """Line number -> the comment on it (without ``#``)."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string.lstrip("#").strip()
    return found


def _trailing(comments: dict[int, str], statement: ast.AnnAssign) -> str:
    for line in range(statement.lineno, (statement.end_lineno or statement.lineno) + 1):
        if line in comments:
            return comments[line]
    return ""


def _above(lines: list[str], comments: dict[int, str], lineno: int) -> str:
    """The comment lines right above line ``lineno`` (1-based), joined."""
    found = []
    line = lineno - 1
    while line >= 1 and lines[line - 1].strip().startswith("#"):
        found.append(comments[line])
        line -= 1
    return " ".join(reversed(found))


def _attributes(docstring: str) -> dict[str, str]:
    """A Google-style ``Attributes:`` section: name -> its text, continuation lines joined."""
    section = docstring.split("Attributes:", 1)[1] if "Attributes:" in docstring else ""
    found: dict[str, str] = {}
    name = None
    for line in section.splitlines():
        entry = re.match(r"\s{4}(\w+): (.*)", line)
        if entry:
            name = entry.group(1)
            found[name] = entry.group(2).strip()
        elif name and line.strip():
            found[name] += " " + line.strip()
    return {k: _plain(v) for k, v in found.items()}


def _plain(text: str) -> str:
    """Docstring markup as plain text: ``x`` and :data:`~a.b.X` read x and X; no final period."""
    text = re.sub(r":\w+:`~?([\w.]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return text.replace("``", "").removesuffix(".")


def annotated_config(cfg: DictConfig) -> str:
    """``cfg`` as YAML-like lines (values before interpolation), each option with its meaning."""
    data = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(data, dict)
    out: list[str] = []
    _walk({str(k): v for k, v in data.items() if k != "hydra"}, schema.Config, 0, out)
    return "\n".join(out)


def _walk(node: dict[str, Any], cls: type | None, depth: int, out: list[str]) -> None:
    hints = _hints(cls)
    docs = field_docs()
    for key, value in node.items():
        owners = cls.__mro__ if cls is not None else ()
        doc = next((docs[(c.__name__, key)] for c in owners if (c.__name__, key) in docs), "")
        inner = _dataclass_of(hints.get(key))
        indent = "  " * depth
        if isinstance(value, dict) and value and inner is not None:
            out.append(_line(f"{indent}{key}:", doc))
            _walk(value, inner, depth + 1, out)
        else:
            out.append(_line(f"{indent}{key}: {_flow(value)}", doc))


def _line(text: str, doc: str) -> str:
    return f"{text.ljust(COMMENT_COLUMN - 2)}  # {doc}" if doc else text


def _flow(value: Any) -> str:
    """One line of YAML flow style, cut past :data:`VALUE_CHARS`."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 1] + "…"


def _hints(cls: type | None) -> dict[str, Any]:
    if cls is None or not dataclasses.is_dataclass(cls):
        return {}
    return typing.get_type_hints(cls, vars(schema))


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass a field holds (``X | None`` unwrapped), or None."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        found = [a for a in typing.get_args(hint) if isinstance(a, type) and dataclasses.is_dataclass(a)]
        return found[0] if found else None
    return None
