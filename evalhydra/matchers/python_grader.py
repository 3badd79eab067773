"""OpenAI's ``python`` grader: the grader's ``grade(sample, item)`` run in a confined subprocess.

The source, the sample and the item go to a fresh interpreter (``python -I``: no
user site, no environment paths) on stdin; what the grader prints goes to its
stderr, and the score comes back as the last line of stdout. A grader that
raises, returns no number, or outlives its timeout fails with that reason.

The code is the suite's own, run with the user's rights, so it is confined the way
a careful runner confines a script, not sandboxed: it gets an environment holding
no variable of the run's (no key), a scratch folder as its working directory and
home, its own session (the whole process group is killed when ``grade`` returns
and at the timeout), and resource limits (:data:`LIMITS`: address space, processes,
file size, CPU seconds). As OpenAI's hosted graders have no network, an audit hook
(PEP 578, installed before the grader's code runs; Python code cannot remove it)
refuses sockets, new processes and native libraries, and writes, renames and
deletes outside the scratch folder: each is a ``PermissionError`` in ``grade``.
Native code already loaded could still step around it; it is a confinement, not a
sandbox. What it prints goes to files capped by that file size, and only their
last :data:`OUTPUT_TAIL` bytes are read back.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import trio

__all__ = ["DEFAULT_TIMEOUT_S", "PythonGraderError", "check_source", "run_python_grader"]

#: How long one ``grade`` call may take unless the matcher says otherwise (OpenAI's limit: 2 minutes).
DEFAULT_TIMEOUT_S = 120.0
#: A grader's limits (``resource`` names): the memory OpenAI's hosted graders get (docs/openai-evals.md).
LIMITS = {"RLIMIT_AS": 2 << 30, "RLIMIT_FSIZE": 64 << 20}
#: Processes (and threads) the user may run beyond those running when the first grader starts.
SPARE_PROCESSES = 128
#: The most bytes of a grader's printed output read back (its end, where the error is).
OUTPUT_TAIL = 64 << 10

_RUNNER = """
import json, os, resource, sys
for name, value in json.loads(sys.argv[1]).items():
    resource.setrlimit(getattr(resource, name), (value, value))
payload = json.loads(sys.stdin.buffer.read())
out, sys.stdout = sys.stdout, sys.stderr  # the grader's prints must not mix with the score
sys.dont_write_bytecode = True
HOME = os.path.realpath(os.getcwd())
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
NETWORK_OR_PROCESS = {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
    "socket.gethostbyname", "socket.sendto", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
    "os.spawn", "os.fork", "os.forkpty", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "mmap.__new__"}
PATHS = {"os.remove": 1, "os.rename": 2, "os.replace": 2, "os.mkdir": 1, "os.rmdir": 1, "os.symlink": 2,
    "os.link": 2, "os.chmod": 1, "os.chown": 1, "os.truncate": 1, "os.utime": 1, "shutil.rmtree": 1,
    "os.setxattr": 1, "os.removexattr": 1, "os.chdir": 1}
def inside(path):
    if isinstance(path, int):
        return True
    real = os.path.realpath(os.path.join(HOME, os.fsdecode(path)))
    return real == HOME or real.startswith(HOME + os.sep)
def confine(event, args):
    if event in NETWORK_OR_PROCESS:
        raise PermissionError("a grader has no network, no processes and no native code (%s)" % event)
    if event == "open" and args[0] is not None:
        mode, flags = args[1], args[2] or 0
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITES)
        if writes and not inside(args[0]):
            raise PermissionError("a grader writes only in its own folder, not %r" % (args[0],))
    elif event in PATHS and not all(inside(p) for p in args[:PATHS[event]] if p is not None):
        raise PermissionError("a grader changes files only in its own folder (%s %r)" % (event, args[0]))
sys.addaudithook(confine)
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


def _limits(timeout_s: float) -> dict[str, int]:
    """The grader's rlimits: :data:`LIMITS`, processes, and CPU seconds just past its timeout."""
    return {**LIMITS, "RLIMIT_NPROC": _process_limit(), "RLIMIT_CPU": math.ceil(timeout_s) + 1}


@cache
def _process_limit() -> int:
    """The user's tasks now plus :data:`SPARE_PROCESSES` (a fork bomb stops there; the count is
    the user's, so a lower fixed limit would stop a busy desktop's grader from starting a thread)."""
    uid = os.getuid()
    tasks = 0
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                tasks += len(os.listdir(entry / "task"))
        except OSError:
            continue
    return tasks + SPARE_PROCESSES


def _environment(scratch: str) -> dict[str, str]:
    """What a grader's process sees: a path to find programs, and the scratch folder as home."""
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": scratch, "TMPDIR": scratch,
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def _kill_group(process: trio.Process) -> None:
    """Kill the grader's whole session (whatever it started too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _outputs(out_path: Path, err_path: Path) -> tuple[int, str, str]:
    """The larger output's size, and the ends of stdout and stderr."""
    return max(out_path.stat().st_size, err_path.stat().st_size), _tail(out_path), _tail(err_path)


def _tail(path: Path) -> str:
    """The last :data:`OUTPUT_TAIL` bytes of a file, as text."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - OUTPUT_TAIL))
        return handle.read().decode("utf-8", "replace")


async def run_python_grader(source: str, sample: dict[str, Any], item: Any,
                            timeout_s: float = DEFAULT_TIMEOUT_S) -> float:
    """``grade(sample, item)`` of ``source``, run in a confined subprocess (see the module).

    Raises:
        PythonGraderError: It raised, timed out, printed past its file-size limit, or returned
            no finite number.
    """
    payload = json.dumps({"source": source, "sample": sample, "item": item}).encode()
    with tempfile.TemporaryDirectory(prefix="evalhydra-grader-") as scratch:
        out_path, err_path = Path(scratch, ".stdout"), Path(scratch, ".stderr")
        returncode, timed_out = await _run(payload, scratch, out_path, err_path, timeout_s)
        printed, out, err = await trio.to_thread.run_sync(_outputs, out_path, err_path)
    if timed_out:
        raise PythonGraderError(f"grade() ran past its {timeout_s:g} s timeout")
    if printed >= LIMITS["RLIMIT_FSIZE"]:
        raise PythonGraderError(f"grade() printed more than {LIMITS['RLIMIT_FSIZE'] >> 20} MiB")
    if returncode != 0:
        lines = err.strip().splitlines()
        raise PythonGraderError(lines[-1][-2000:] if lines else f"exited with code {returncode}")
    lines = out.strip().splitlines()
    try:
        score = float(json.loads(lines[-1])["score"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise PythonGraderError("grade() returned no number") from None
    if not math.isfinite(score):
        raise PythonGraderError(f"grade() returned {score}")
    return score


async def _run(payload: bytes, scratch: str, out_path: Path, err_path: Path,
               timeout_s: float) -> tuple[int | None, bool]:
    """Run the grader to its end or its timeout; its session is killed either way."""
    argv = [sys.executable, "-I", "-c", _RUNNER, json.dumps(_limits(timeout_s))]
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=out, stderr=err,
                                                   cwd=scratch, env=_environment(scratch),
                                                   start_new_session=True)
    try:
        with trio.move_on_after(timeout_s) as scope:
            assert process.stdin is not None
            try:
                await process.stdin.send_all(payload)
                await process.stdin.aclose()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # it exited without reading: its exit code says why
            await process.wait()
    finally:
        _kill_group(process)
        with trio.CancelScope(shield=True):
            await process.wait()
    return process.returncode, scope.cancelled_caught
