"""hello-file: the agent must create hello.txt containing "hello, world".

PASS when the file holds exactly that text; EXCELLENT when, in addition, the
agent wrote it with a single file-writing tool call.
"""

from __future__ import annotations

from pathlib import Path

from evalhydra.agents import TrialTrace, ValidationCheck, ValidationResult

EXPECTED = "hello, world"


class HelloFileValidator:
    """Checks the file, then how the agent produced it."""

    def validate(
        self, output_dir: Path, log_content: str, trace: TrialTrace | None = None
    ) -> ValidationResult:
        """Judge one trial."""
        target = output_dir / "hello.txt"
        exists = target.is_file()
        content = target.read_text(encoding="utf-8").strip() if exists else ""
        writes = [n for n in (trace.tool_names if trace else []) if "write" in n.lower()]
        checks = [
            ValidationCheck("file_exists", exists, "hello.txt exists" if exists else "hello.txt is missing"),
            ValidationCheck("content_matches", content == EXPECTED, f"content: {content!r}"),
            ValidationCheck("single_write", len(writes) == 1, f"{len(writes)} write tool call(s)"),
        ]
        if not (exists and content == EXPECTED):
            return ValidationResult("FAIL", 0.0, checks)
        if len(writes) == 1:
            return ValidationResult("EXCELLENT", 1.0, checks)
        return ValidationResult("PASS", 0.8, checks)


validator = HelloFileValidator()
