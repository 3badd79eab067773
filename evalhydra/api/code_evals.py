"""Evals defined in Python: :class:`Eval` is written as an own-format eval file and its dataset,
and run through the same job path and store as any file-defined eval (resume, history, reports).

Python objects (a matcher function, tool functions, a tool class) are registered in this module
under a name made of their qualified name and a hash of their source, and the eval file names them
by that path (``evalhydra.api.code_evals.inline_matcher_has_56_1a2b3c4d5e6f``): the same code gives
the same cell keys in the next process (a rerun resumes), changed code gives new ones (the answers
are scored again). They live in this process, so an eval defined in code runs here, not on a
Hydra launcher's workers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalhydra.config.defaults import DEFAULT_STORE_PATH
from evalhydra.core.errors import EvalHydraError
from evalhydra.plan.tools import function_schema

__all__ = ["Eval", "code_eval_overrides", "service_overrides"]

#: Where evals defined in code are written, beside the store.
FOLDER = "python_evals"


@dataclass(frozen=True)
class Eval:
    """An eval defined in code, run by :func:`evalhydra.evaluate` like an eval file.

    Attributes:
        id: The eval's id (``group.name``; the group is the part before the first dot).
        cases: The dataset: dicts or dataclass instances with at least ``id`` and ``input``
            (and ``ideal``, ``expected_tool_calls``, ``tags``, … as a dataset line has them).
        matcher: A matcher's config (``{"kind": "includes"}``, docs/eval-files.md), or a Python
            callable ``fn(ctx) -> bool | float | dict | MatchResult`` (``ctx`` a
            :class:`~evalhydra.matchers.base.MatchContext`: ``ctx.output``, ``ctx.case``, …).
        tools: Tools the model may call: Python functions (name, first docstring paragraph and
            a schema from the signature, as a tool class's methods) or tool configs (dicts).
            A function makes the eval a tool loop.
        tool_class: A class whose public methods are tools, one instance per cell.
        prompt: A template filled from each case's fields (``"Q: {{question}}"``).
        messages: A conversation template (``[{"role": "user", "content": "{{question}}"}]``).
        params: Generation parameters (``temperature``, ``max_tokens``, …).
        trials: Trials per case unless ``trials=`` is given.
        loop: A tool loop's limits (``max_turns``, …).
        description: One line about the eval.
    """

    id: str
    cases: Sequence[Any]
    matcher: Mapping[str, Any] | Callable[..., Any] = field(default_factory=lambda: {"kind": "exact_match"})
    tools: Sequence[Callable[..., Any] | Mapping[str, Any]] = ()
    tool_class: type | None = None
    prompt: str | None = None
    messages: Sequence[Mapping[str, Any]] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    trials: int = 1
    loop: Mapping[str, Any] | None = None
    description: str = ""


#: Registered Python objects, by the name the eval file gives them.
_OBJECTS: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """A registered object, as the custom matcher and tool loader import it by path."""
    if name in _OBJECTS:
        return _OBJECTS[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def code_eval_overrides(ev: Eval, items: Sequence[str]) -> list[str]:
    """Write ``ev`` as an eval file and dataset beside the store (``<store dir>/python_evals/ID``)
    and return the overrides that run it: ``registry=`` that folder and ``eval=`` its id.

    Raises:
        EvalHydraError: A case that is neither a dict nor a dataclass, or an id that is no name.
    """
    if not re.fullmatch(r"[\w][\w.-]*", ev.id or ""):
        raise EvalHydraError(f"Eval.id: {ev.id!r} is not an eval id.",
                             "Use letters, digits, '.', '-' and '_'.")
    root = _store_dir(items) / FOLDER / ev.id
    lines = "".join(json.dumps(_case(c, i), ensure_ascii=False) + "\n" for i, c in enumerate(ev.cases))
    _write(root / "evals" / f"{ev.id}.jsonl", lines)
    spec = yaml.safe_dump(_eval_file(ev), sort_keys=False, allow_unicode=True)
    _write(root / "evals" / f"{ev.id}.yaml", spec)
    return [f"registry={root}", f"eval={ev.id}"]


def service_overrides(service: Any, items: Sequence[str]) -> list[str]:
    """Write a service given as a config (a dict, or a :class:`~evalhydra.config.schema.ServiceConfig`)
    as ``conf/service/NAME.yaml`` beside the store, and return the overrides that select it."""
    if dataclasses.is_dataclass(service) and not isinstance(service, type):
        config = dataclasses.asdict(service)
    elif isinstance(service, Mapping):
        config = dict(service)
    else:
        raise EvalHydraError(f"service: a {type(service).__name__}, not a name or a service's config.",
                             "Give service='mock', or a dict such as {'name': 'my_model', 'base_url': …}.")
    name = str(config.get("name") or "")
    if not re.fullmatch(r"[\w][\w.-]*", name):
        raise EvalHydraError(f"service: {name!r} is not a service name.",
                             "Give the config a name: {'name': 'my_model', …}.")
    conf = _store_dir(items) / FOLDER / "conf"
    _write(conf / "service" / f"{name}.yaml", yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return [f"hydra.searchpath=[file://{conf.resolve()}]", f"service={name}"]


def _store_dir(items: Sequence[str]) -> Path:
    given = next((i.split("=", 1)[1] for i in reversed(items) if i.lstrip("+~").startswith("store.path=")),
                 DEFAULT_STORE_PATH)
    return Path(given).expanduser().absolute().parent


def _case(case: Any, index: int) -> dict[str, Any]:
    if dataclasses.is_dataclass(case) and not isinstance(case, type):
        return dataclasses.asdict(case)
    if isinstance(case, Mapping):
        return dict(case)
    raise EvalHydraError(f"Eval.cases[{index}]: a {type(case).__name__}, not a dict or a dataclass.",
                         "Give each case as {'id': …, 'input': …, 'ideal': …} or a dataclass.")


def _eval_file(ev: Eval) -> dict[str, Any]:
    spec: dict[str, Any] = {"id": ev.id, "description": ev.description, "dataset_path": f"{ev.id}.jsonl",
                            "matcher": _matcher(ev.matcher), "default_run_count": ev.trials}
    if ev.tools:
        spec["tools"] = [_tool(t) for t in ev.tools]
    if ev.tool_class is not None:
        spec["tool_class"] = _inline(ev.tool_class, "tools")
    optional = {"prompt": ev.prompt, "messages": list(ev.messages) if ev.messages else None,
                "params": dict(ev.params) or None, "loop": dict(ev.loop) if ev.loop else None}
    spec.update({k: v for k, v in optional.items() if v is not None})
    return spec


def _matcher(matcher: Any) -> Any:
    """A matcher config with every Python callable in it (the matcher itself, a composite's part,
    a ``_target_``) replaced by its registered path."""
    if callable(matcher) and not isinstance(matcher, Mapping):
        return {"kind": "custom", "_target_": _inline(matcher, "matcher")}
    if isinstance(matcher, Mapping):
        out = {k: _matcher(v) if k == "parts" else v for k, v in matcher.items()}
        if callable(out.get("_target_")):
            out["_target_"] = _inline(out["_target_"], "matcher")
        return out
    if isinstance(matcher, list | tuple):
        return [_matcher(part) for part in matcher]
    return matcher


def _tool(tool: Any) -> dict[str, Any]:
    if isinstance(tool, Mapping):
        return dict(tool)
    if not callable(tool):
        raise EvalHydraError(f"Eval.tools: a {type(tool).__name__} is neither a function nor a tool config.")
    name = getattr(tool, "__name__", "tool")
    description = (inspect.getdoc(tool) or name).split("\n\n", 1)[0].replace("\n", " ")
    schema = function_schema(tool, f"Eval.tools: {name}")
    return {"name": name, "description": description, "parameters_json": json.dumps(schema),
            "implementation": _inline(tool, "tool")}


def _inline(obj: Any, kind: str) -> str:
    """Register ``obj``; its path, stable while its code is the same."""
    name = re.sub(r"\W+", "_", getattr(obj, "__qualname__", type(obj).__name__)).strip("_").lower() or kind
    key = f"inline_{kind}_{name}_{_fingerprint(obj)}"
    _OBJECTS[key] = obj
    return f"{__name__}.{key}"


def _fingerprint(obj: Any) -> str:
    """A hash of ``obj``'s source (its code's bytes and constants where the source is not on disk)."""
    try:
        text = inspect.getsource(obj)
    except (OSError, TypeError):
        code = getattr(obj, "__code__", None)
        text = repr((code.co_code, code.co_consts)) if code is not None else repr(obj)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it holds it already, atomically (a second process
    writing the same eval never sees half a file)."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)
