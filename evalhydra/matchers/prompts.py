"""aiwg prompt files: front matter, ``## System`` / ``## User`` sections, ``{{var}}``.

A prompt file is optional YAML front matter between ``---`` lines, then a
``## System`` section and a ``## User`` section (headings inside fenced code
blocks do not count; a file with neither heading is all user text).
``{{name}}`` placeholders are replaced as plain text in one pass, so a value
that itself contains ``{{input}}`` is never substituted again.

An evaluator prompt must stay isolated from the generator: it may use only
``{{input}}`` and ``{{output}}``, and a file mentioning ``{{steps}}``,
``{{chain_of_thought}}``, ``{{intermediate}}``, ``generator_context`` or
``system_prompt`` anywhere is refused when the eval loads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalhydra.core.errors import EvalHydraError
from evalhydra.core.messages import placeholders, render

__all__ = [
    "EVALUATOR_VARIABLES",
    "PromptFile",
    "contamination_markers",
    "load_evaluator_prompt",
    "parse_prompt",
    "placeholders",
    "render",
]

_HEADING = re.compile(r"^##\s+(System|User)\s*$", re.IGNORECASE)

#: Placeholders that would leak generator context into an evaluator prompt.
_CONTAMINATING_VARIABLES = ("steps", "chain_of_thought", "intermediate")
#: Words that may not appear anywhere in an evaluator prompt file.
_CONTAMINATING_WORDS = ("generator_context", "system_prompt")
EVALUATOR_VARIABLES = frozenset({"input", "output"})


@dataclass(frozen=True, slots=True)
class PromptFile:
    """A parsed prompt file.

    Attributes:
        system: The ``## System`` section (None when the file has none).
        user: The ``## User`` section.
        front_matter: The YAML front matter ({} when absent).
    """

    system: str | None
    user: str
    front_matter: dict[str, Any] = field(default_factory=dict)

    def render(self, variables: Mapping[str, str]) -> tuple[str | None, str]:
        """Return ``(system, user)`` with the placeholders substituted."""
        system = None if self.system is None else render(self.system, variables)
        return system, render(self.user, variables)


def contamination_markers(text: str) -> list[str]:
    """The generator-context markers found in a prompt file's text (empty when clean)."""
    used = placeholders(text)
    found = [f"{{{{{v}}}}}" for v in _CONTAMINATING_VARIABLES if v in used]
    return found + [word for word in _CONTAMINATING_WORDS if word in text]


def _split_front_matter(text: str, name: str) -> tuple[dict[str, Any], str]:
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise EvalHydraError(f"{name}: front matter opened with '---' is never closed")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        raise EvalHydraError(f"{name}: invalid YAML front matter: {exc}") from None
    if not isinstance(meta, dict):
        raise EvalHydraError(f"{name}: front matter must be a YAML mapping")
    return meta, "\n".join(lines[end + 1 :])


def _sections(body: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_fence = False
    for line in body.split("\n"):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            current = sections.setdefault(heading.group(1).lower(), [])
        elif current is not None:
            current.append(line)
    return sections


def parse_prompt(text: str, name: str) -> PromptFile:
    """Parse a prompt file's text.

    Args:
        text: The file's content.
        name: The file's name, for error messages.

    Raises:
        EvalHydraError: Bad front matter, or a ``## System`` section without ``## User``.
    """
    meta, body = _split_front_matter(text.replace("\r\n", "\n").lstrip("\ufeff"), name)
    sections = _sections(body)
    if not sections:
        return PromptFile(system=None, user=body.strip(), front_matter=meta)
    if "user" not in sections:
        raise EvalHydraError(f"{name}: prompt file has no '## User' section")
    system = "\n".join(sections["system"]).strip() if "system" in sections else None
    return PromptFile(system=system, user="\n".join(sections["user"]).strip(), front_matter=meta)


def load_evaluator_prompt(path: Path, name: str) -> PromptFile:
    """Read, parse and isolation-check an evaluator prompt file.

    Args:
        path: The resolved file path.
        name: How to name the file in errors (the registry-relative path).

    Raises:
        EvalHydraError: The file cannot be read or parsed, references generator
            context, or uses a placeholder other than ``{{input}}``/``{{output}}``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalHydraError(f"{name}: cannot read evaluator prompt: {exc}") from None
    markers = contamination_markers(text)
    if markers:
        raise EvalHydraError(
            f"{name}: evaluator prompt references generator context ({', '.join(markers)})",
            "An isolated evaluator may see only {{input}} and {{output}}.",
        )
    prompt = parse_prompt(text, name)
    extra = placeholders(f"{prompt.system or ''}\n{prompt.user}") - EVALUATOR_VARIABLES
    if extra:
        names = ", ".join(f"{{{{{v}}}}}" for v in sorted(extra))
        raise EvalHydraError(
            f"{name}: evaluator prompt uses {names}",
            "An evaluator prompt may use only {{input}} and {{output}}.",
        )
    return prompt
