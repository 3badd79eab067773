"""OpenAI Evals templates: ``{{ item.question }}``, ``{{ sample.output_text }}``, ``{{ item.a.b[0] }}``.

As OpenAI documents them: every ``{{ … }}`` names a namespace (``item`` or
``sample``) and a variable, nested variables reached with a JSON-path-like
syntax (``.key`` and ``[index]``). A string is put in as it is; any other value
(a number, a list, an object) as its JSON. A reference that does not resolve is
an error naming it, never an empty string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.strictjson import loads_plain

__all__ = ["NAMESPACES", "ROLES", "SAMPLING_PARAMS", "TemplateError", "check_template", "render", "resolve",
           "text_parts"]

#: The namespaces a template may name.
NAMESPACES = ("item", "sample")
_PATH = re.compile(r"([A-Za-z_][A-Za-z0-9_\-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]|\['([^']*)'\]")


#: A message's roles, and the chat-completions role each is sent as (``developer`` as ``system``).
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
#: The sampling parameters of a run or a model grader, and the request field each becomes.
SAMPLING_PARAMS = {"temperature": "temperature", "top_p": "top_p", "seed": "seed",
                   "max_completion_tokens": "max_completion_tokens",
                   "max_completions_tokens": "max_completion_tokens", "reasoning_effort": "reasoning_effort"}
#: The content parts that are text (anything else, an image or audio, is not).
TEXT_PARTS = ("input_text", "output_text", "text")


class TemplateError(ValueError):
    """A template names something it cannot use: an unknown namespace, a bad path, a missing value."""


def check_template(template: str) -> None:
    """Check that every ``{{ … }}`` of ``template`` is a ``namespace.path`` (values are not looked up).

    Raises:
        TemplateError: Naming the first reference that is not.
    """
    for _, _, reference in _references(template):
        _steps(reference)


def _references(template: str) -> Iterator[tuple[int, int, str]]:
    """Each ``{{ reference }}`` of ``template`` on one line: its start, its end and the reference
    (trimmed), found in one pass (a regular expression backtracks over an unclosed ``{{``)."""
    position = 0
    while (start := template.find("{{", position)) >= 0:
        line_end = template.find("\n", start)
        line_end = len(template) if line_end < 0 else line_end
        end = template.find("}}", start + 2, line_end)
        if end < 0:  # no later "{{" of this line is closed either
            position = line_end
            continue
        yield start, end + 2, template[start + 2:end].strip()
        position = end + 2


def _steps(reference: str) -> list[str | int]:
    """``item.a[0].b`` → ``["item", "a", 0, "b"]``; raises on anything else."""
    steps: list[str | int] = []
    position = 0
    while position < len(reference):
        if steps and reference[position] == ".":
            position += 1
        match = _PATH.match(reference, position)
        if match is None or (not steps and match.group(1) is None):
            raise TemplateError(f"'{{{{{reference}}}}}' is not a namespace.variable path")
        name, index, double, single = match.groups()
        steps.append(int(index) if index is not None else name or double or single or "")
        position = match.end()
    if not steps or steps[0] not in NAMESPACES or len(steps) < 2:
        raise TemplateError(f"'{{{{{reference}}}}}' must name a variable of {' or '.join(NAMESPACES)}"
                            f" (e.g. {{{{item.question}}}})")
    return steps


def resolve(reference: str, namespaces: Mapping[str, Any]) -> Any:
    """The value ``reference`` (``item.a.b``) names in ``namespaces``.

    Raises:
        TemplateError: The path is malformed, or a step of it is not there.
    """
    steps = _steps(reference)
    value: Any = namespaces.get(str(steps[0]))
    if value is None:
        raise TemplateError(f"'{{{{{reference}}}}}': there is no {steps[0]} here")
    for step in steps[1:]:
        if isinstance(value, str):  # a JSON string on the path (a tool call's arguments): read into it
            value = _json_or_text(value)
        in_list = isinstance(step, int) and isinstance(value, list) and step < len(value)
        if in_list or (isinstance(step, str) and isinstance(value, Mapping) and step in value):
            value = value[step]
        else:
            raise TemplateError(f"'{{{{{reference}}}}}': {step!r} is not in the {steps[0]}")
    return value


def _json_or_text(text: str) -> Any:
    """``text`` parsed when it is a JSON object or array, else the text itself."""
    if not text.lstrip().startswith(("{", "[")):
        return text
    try:
        return loads_plain(text, constants=False)
    except ValueError:
        return text


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render(template: str, namespaces: Mapping[str, Any]) -> str:
    """``template`` with every ``{{ reference }}`` replaced by its value's text.

    Raises:
        TemplateError: A reference does not resolve.
    """
    parts, position = [], 0
    for start, end, reference in _references(template):
        parts += [template[position:start], _text(resolve(reference, namespaces))]
        position = end
    return "".join(parts) + template[position:]


def text_parts(content: Any, where: str) -> list[str]:
    """The texts of a message's content: a string, or its text parts (``input_text``, …).

    Raises:
        EvalHydraError: A part is an image, audio or anything but text, naming it by ``where``.
    """
    parts = content if isinstance(content, list) else [content]
    texts = []
    for index, part in enumerate(parts):
        text = part if isinstance(part, str) else part.get("text") if isinstance(part, Mapping) else None
        kind = part.get("type") if isinstance(part, Mapping) else "input_text"
        if not isinstance(text, str) or kind not in TEXT_PARTS:
            raise EvalHydraError(f"{where}.content[{index}].type: {kind!r} content does not run here"
                                 " (text only).", "Describe the image or audio in text.")
        texts.append(text)
    return texts
