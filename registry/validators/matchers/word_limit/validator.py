"""A zrb-style ``validator.py`` used by a text eval (``matchers.custom_validator``).

The protocol is zrb-llm-evaluator's: a module-level ``validator`` whose
``validate(output_dir, log_content, trace=None)`` returns a result with
``status`` (EXCELLENT | PASS | FAIL), ``score`` and ``details`` (checks with
``name``, ``passed``, ``message``). For a text service ``output_dir`` holds
``output.txt`` and ``log_content`` is the output itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIMIT = 8


@dataclass
class Check:
    """One named check."""

    name: str
    passed: bool
    message: str = ""


@dataclass
class Result:
    """What ``validate`` returns."""

    status: str
    score: float
    details: list[Check] = field(default_factory=list)


class WordLimitValidator:
    """EXCELLENT at up to 3 words, PASS up to 8, FAIL beyond (or when empty)."""

    def validate(self, output_dir: Path, log_content: str, trace: Any = None) -> Result:
        """Judge one output."""
        text = (output_dir / "output.txt").read_text(encoding="utf-8")
        words = len(text.split())
        checks = [
            Check("non_empty", words > 0, "" if words else "output is empty"),
            Check("word_limit", 0 < words <= LIMIT, f"{words} words > {LIMIT}" if words > LIMIT else ""),
        ]
        if not all(c.passed for c in checks):
            return Result("FAIL", 0.0, checks)
        return Result("EXCELLENT", 1.0, checks) if words <= 3 else Result("PASS", 0.8, checks)


validator = WordLimitValidator()
