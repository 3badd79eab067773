"""User code (tools, tool classes, custom matchers, validators) under a cell's containment.

Three rules, the same wherever evalhydra runs code it did not write:

* **Failing.** Anything user code raises, a ``SystemExit`` or ``GeneratorExit`` too, is the
  caller's error (a tool's error the model reads, a matcher's failing verdict), never the run's:
  only a real Ctrl-C and trio's own cancellation pass through (:func:`passes_through`). Its text
  is taken without trusting the exception's ``__str__`` (:func:`describe`).
* **Threads.** Blocking user code runs in threads from a limiter of its own
  (:data:`USER_THREADS`), never trio's default one, which the store's writer and the end of a
  run use. A thread whose caller gave up (a timeout) cannot be stopped; it keeps running, holds a
  token of this limiter alone, and is counted as abandoned, so the summary can say so.
* **Loading** (:func:`import_file` for a file, :func:`evalhydra.matchers.custom.locate` for a
  dotted path): whatever importing user code raises is an import error naming what was loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import trio

__all__ = ["USER_THREADS", "USER_THREAD_LIMIT", "UserCodeImportError", "UserThreads", "describe",
           "import_file", "passes_through"]

#: Threads of user code running at once, per run.
USER_THREAD_LIMIT = 64
#: Most characters of an exception's text kept.
MAX_ERROR_CHARS = 2000

T = TypeVar("T")


def passes_through(exc: BaseException) -> bool:
    """Whether ``exc`` must leave user code's containment: a real Ctrl-C, or trio's cancellation
    (alone or inside a group)."""
    if isinstance(exc, KeyboardInterrupt | trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(passes_through(inner) for inner in exc.exceptions)
    return False


def describe(exc: BaseException) -> str:
    """``TypeName: text`` of an exception from user code; a ``__str__`` that raises or runs long
    does not get to break the caller (the text is cut at :data:`MAX_ERROR_CHARS`)."""
    try:
        text = str(exc)
    except BaseException as inner:  # noqa: BLE001 (a hostile __str__ is the tool's problem)
        if passes_through(inner):
            raise
        text = f"<its message could not be read: {type(inner).__name__}>"
    name = type(exc).__name__
    text = text[:MAX_ERROR_CHARS]
    return f"{name}: {text}" if text else name


class UserThreads:
    """The threads of user code: one limiter per trio run, and counts of abandoned threads."""

    def __init__(self, limit: int = USER_THREAD_LIMIT) -> None:
        self.limit = limit
        self._limiter: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("user_threads")
        self._lock = threading.Lock()
        self.abandoned = 0  # threads whose caller gave up, since the last reset
        self.still_running = 0  # of those, the ones that have not returned yet

    def reset(self) -> None:
        """Start counting afresh (a run's start)."""
        with self._lock:
            self.abandoned = self.still_running = 0

    def limiter(self) -> trio.CapacityLimiter:
        """This trio run's limiter of user-code threads."""
        try:
            return self._limiter.get()
        except LookupError:
            made = trio.CapacityLimiter(self.limit)
            self._limiter.set(made)
            return made

    async def run_sync(self, function: Callable[[], T]) -> T:
        """Run ``function`` in a user-code thread; when the caller is cancelled (a timeout), the
        thread is abandoned and counted, and the cancellation goes on."""
        state = {"done": False, "abandoned": False}

        def body() -> T:
            try:
                return function()
            finally:
                with self._lock:
                    state["done"] = True
                    if state["abandoned"]:
                        self.still_running -= 1

        try:
            return await trio.to_thread.run_sync(body, abandon_on_cancel=True, limiter=self.limiter())
        except trio.Cancelled:
            with self._lock:
                if not state["done"] and not state["abandoned"]:
                    state["abandoned"] = True
                    self.abandoned += 1
                    self.still_running += 1
            raise

    def report(self) -> str:
        """The summary's line about abandoned threads, or "" when there were none."""
        with self._lock:
            abandoned, running = self.abandoned, self.still_running
        if not abandoned:
            return ""
        return (f"{abandoned} thread(s) of user code (tools, matchers) outlived their timeouts and were"
                f" abandoned, {running} still running at the end: a blocking tool should take its own"
                " timeout, or be async")


#: The process's user-code threads (a process runs one trio run at a time).
USER_THREADS = UserThreads()


class UserCodeImportError(ImportError):
    """A user's file that cannot be imported; ``args[0]`` says what it raised (the caller names
    the file)."""


def import_file(path: Path, prefix: str) -> ModuleType:
    """Import the Python file ``path`` as a module of its own (named ``prefix`` + its folder and a
    hash of its path, registered in ``sys.modules`` as dataclasses and pickling need).

    Raises:
        UserCodeImportError: It cannot be loaded, or importing it raised anything (a
            ``SystemExit`` too); a real Ctrl-C and trio's cancellation pass through.
    """
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    folder = re.sub(r"\W", "_", path.parent.name)
    name = f"{prefix}{folder}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserCodeImportError("cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if passes_through(exc):
            raise
        raise UserCodeImportError(f"failed to import: {describe(exc)}") from None
    return module
