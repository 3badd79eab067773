"""count-todos: the agent must report "TODO count: 3" without editing files.

Judged from the agent's own words (the trace's assistant text, or the log
when there is no history) and from the untouched workdir.
"""

from __future__ import annotations

import re
from pathlib import Path

from evalhydra.agents import TrialTrace, ValidationCheck, ValidationResult

ANSWER = re.compile(r"TODO count:\s*(\d+)")
ORIGINAL = Path(__file__).parent / "workdir" / "notes.md"


class CountTodosValidator:
    """Checks the reported count and that notes.md is unchanged."""

    def validate(
        self, output_dir: Path, log_content: str, trace: TrialTrace | None = None
    ) -> ValidationResult:
        """Judge one trial."""
        text = trace.assistant_text if trace and trace.assistant_text else log_content
        answers = ANSWER.findall(text)
        correct = bool(answers) and answers[-1] == "3"
        notes = output_dir / "notes.md"
        untouched = notes.is_file() and notes.read_bytes() == ORIGINAL.read_bytes()
        checks = [
            ValidationCheck("count_correct", correct, f"reported: {answers[-1] if answers else 'nothing'}"),
            ValidationCheck("notes_untouched", untouched, "notes.md unchanged"),
        ]
        if correct and untouched:
            return ValidationResult("EXCELLENT", 1.0, checks)
        return ValidationResult("PASS" if correct else "FAIL", 0.5 if correct else 0.0, checks)


validator = CountTodosValidator()
