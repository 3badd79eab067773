"""fix-bug: the agent must fix ``add`` in calc.py.

The fixed module is imported in a separate Python process (the agent's code
never runs inside evalhydra). PASS when ``add`` sums; EXCELLENT when, in
addition, the agent read calc.py before writing it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evalhydra.agents import TrialTrace, ValidationCheck, ValidationResult

PROBE = "import calc; assert calc.add(2, 3) == 5 and calc.add(-1, 1) == 0"


def _add_works(output_dir: Path) -> tuple[bool, str]:
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE], cwd=output_dir, capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        return False, "importing calc.py timed out"
    last_line = (proc.stderr.strip().splitlines() or [""])[-1]
    return proc.returncode == 0, "add() sums" if proc.returncode == 0 else last_line


def _read_before_write(trace: TrialTrace | None) -> bool:
    names = [n.lower() for n in (trace.tool_names if trace else [])]
    reads = [i for i, n in enumerate(names) if "read" in n]
    writes = [i for i, n in enumerate(names) if "write" in n or "edit" in n]
    return bool(reads and writes and reads[0] < writes[0])


class FixBugValidator:
    """Runs calc.add in a subprocess and looks at the tool-call order."""

    def validate(
        self, output_dir: Path, log_content: str, trace: TrialTrace | None = None
    ) -> ValidationResult:
        """Judge one trial."""
        works, message = _add_works(output_dir)
        careful = _read_before_write(trace)
        checks = [
            ValidationCheck("add_sums", works, message),
            ValidationCheck("read_before_write", careful, "read calc.py before editing it"),
        ]
        if not works:
            return ValidationResult("FAIL", 0.0, checks)
        return (
            ValidationResult("EXCELLENT", 1.0, checks) if careful else ValidationResult("PASS", 0.7, checks)
        )


validator = FixBugValidator()
