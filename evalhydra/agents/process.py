"""One agent process, bounded: its output capped on disk and in memory, its descendants ended.

* **Output**: stdout and stderr come through a pipe. The first
  :data:`LOG_HEAD_BYTES` go to ``stdout.log`` as they come; after that only the
  last :data:`LOG_TAIL_BYTES` are kept (in a buffer of that size), and at the
  end a note saying how many bytes were left out is written before them. An
  agent printing without end costs at most the two caps, on disk and in memory.
* **Descendants**: the agent runs in a session of its own, and every process it
  starts inherits :data:`TRIAL_ENV` with a token unique to the trial. When the
  trial ends (or times out) the process group is killed, and then every process
  of this user whose environment carries the token: a helper that started its
  own session (``setsid``), and so left the group, ends with the trial too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import trio

__all__ = ["LOG_HEAD_BYTES", "LOG_TAIL_BYTES", "TRIAL_ENV", "end_trial_processes", "run_bounded"]

LOG_HEAD_BYTES = 8 * 1024 * 1024
LOG_TAIL_BYTES = 8 * 1024 * 1024
#: The environment variable that marks every process of one trial.
TRIAL_ENV = "EVALHYDRA_TRIAL"
#: How long the log pipe may stay open after the trial's processes were killed.
_DRAIN_S = 2.0
_READ = 1 << 16


class _CappedLog:
    """Writes the head of a stream to a file and keeps its tail, dropping the middle."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.written = 0
        self.dropped = 0
        self.tail = bytearray()

    def add(self, data: bytes | bytearray) -> None:
        room = LOG_HEAD_BYTES - self.written
        if room > 0:
            head, data = data[:room], data[room:]
            self.handle.write(head)
            self.written += len(head)
        if data:
            self.tail += data
            extra = len(self.tail) - LOG_TAIL_BYTES
            if extra > 0:
                del self.tail[:extra]
                self.dropped += extra

    def close(self) -> None:
        if self.dropped:
            note = f"\n[evalhydra: {self.dropped} bytes of output left out here]\n"
            self.handle.write(note.encode())
        self.handle.write(bytes(self.tail))


async def _copy(stream: trio.abc.ReceiveStream, log: _CappedLog) -> None:
    with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
        while data := await stream.receive_some(_READ):
            log.add(data)


def _marked(token: str) -> list[int]:
    """Pids of this user's processes whose environment carries the trial's token."""
    mark = f"{TRIAL_ENV}={token}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if mark in (entry / "environ").read_bytes():
                found.append(int(entry.name))
    return found


def end_trial_processes(pgid: int, token: str) -> None:
    """SIGKILL the trial's process group, then every process still carrying its token."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for _ in range(3):  # a process may start another while it is being found
        pids = [pid for pid in _marked(token) if pid != os.getpid()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


async def run_bounded(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path,
                      timeout: float) -> tuple[int | None, bool]:
    """Run ``argv`` with its output capped into ``log_path``; return (returncode, timed out).

    Args:
        argv: The command.
        cwd: Its working directory.
        env: Its environment (the trial's token is added).
        log_path: Where stdout and stderr go (see the module docstring).
        timeout: Seconds before the process and its descendants are killed.
    """
    token = uuid.uuid4().hex
    with log_path.open("wb") as handle:
        log = _CappedLog(handle)
        proc = await trio.lowlevel.open_process(
            list(argv), cwd=str(cwd), env={**env, TRIAL_ENV: token}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        assert proc.stdout is not None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_copy, proc.stdout, log)
                with trio.move_on_after(timeout) as scope:
                    await proc.wait()
                end_trial_processes(proc.pid, token)
                with trio.move_on_after(_DRAIN_S):  # every writer is gone: the pipe ends
                    await proc.wait()
                nursery.cancel_scope.deadline = trio.current_time() + _DRAIN_S
        finally:
            end_trial_processes(proc.pid, token)
            with trio.CancelScope(shield=True):
                await proc.wait()
                await proc.stdout.aclose()
            log.close()
    return proc.returncode, scope.cancelled_caught
