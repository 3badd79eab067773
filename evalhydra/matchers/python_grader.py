"""OpenAI's ``python`` grader: the grader's ``grade(sample, item)`` run in a Python subprocess.

The source, the sample and the item go to a fresh interpreter (``python -I``:
no user site, no environment paths) on stdin; what the grader prints goes to
its stderr, and the score comes back as the last line of stdout. A grader that
raises, returns no number, or outlives its timeout fails with that reason. The
code runs with the user's own rights, like a custom matcher: it is the suite's
own code, not a sandbox.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import trio

__all__ = ["DEFAULT_TIMEOUT_S", "PythonGraderError", "check_source", "run_python_grader"]

#: How long one ``grade`` call may take unless the matcher says otherwise.
DEFAULT_TIMEOUT_S = 60.0

_RUNNER = """
import json, sys
payload = json.loads(sys.stdin.buffer.read())
out, sys.stdout = sys.stdout, sys.stderr  # the grader's prints must not mix with the score
scope = {"__name__": "grader"}
exec(compile(payload["source"], "<grader>", "exec"), scope)
score = scope["grade"](payload["sample"], payload["item"])
if isinstance(score, bool) or not isinstance(score, (int, float)):
    raise SystemExit("grade() returned %r, not a number" % (score,))
out.write(json.dumps({"score": float(score)}) + "\\n")
"""


class PythonGraderError(Exception):
    """The grader did not return a score: why, in one line."""


def check_source(source: str) -> str | None:
    """Why ``source`` cannot be a grader (a syntax error, no ``grade`` function), or None."""
    try:
        tree = compile(source, "<grader>", "exec", flags=0x400, dont_inherit=True)  # PyCF_ONLY_AST
    except SyntaxError as exc:
        return f"its source does not compile: {exc.msg} (line {exc.lineno})"
    if not any(getattr(node, "name", None) == "grade" for node in getattr(tree, "body", [])):
        return "its source defines no grade(sample, item) function"
    return None


async def _kill(process: trio.Process) -> None:
    """A grader past its timeout is stopped at once (SIGKILL): it has nothing to clean up."""
    process.kill()


async def run_python_grader(source: str, sample: dict[str, Any], item: Any,
                            timeout_s: float = DEFAULT_TIMEOUT_S) -> float:
    """``grade(sample, item)`` of ``source``, run in a subprocess.

    Raises:
        PythonGraderError: It raised, timed out, or returned no finite number.
    """
    payload = json.dumps({"source": source, "sample": sample, "item": item}).encode()
    with trio.move_on_after(timeout_s) as scope:
        done = await trio.run_process([sys.executable, "-I", "-c", _RUNNER], stdin=payload,
                                      capture_stdout=True, capture_stderr=True, check=False,
                                      deliver_cancel=_kill)
    if scope.cancelled_caught:
        raise PythonGraderError(f"grade() ran past its {timeout_s:g} s timeout")
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise PythonGraderError(lines[-1] if lines else f"exited with code {done.returncode}")
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        score = float(json.loads(lines[-1])["score"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise PythonGraderError("grade() returned no number") from None
    if not math.isfinite(score):
        raise PythonGraderError(f"grade() returned {score}")
    return score
