"""Ctrl-C and SIGTERM during a run: the run's scope is cancelled, so what is stored stays stored
and the run is marked interrupted."""

from __future__ import annotations

import signal
import threading

import trio

__all__ = ["watch_signals"]


async def watch_signals(scope: trio.CancelScope) -> None:
    """Cancel ``scope`` on the first SIGINT or SIGTERM (graceful stop: flush, mark interrupted).

    Later signals (a second and third Ctrl-C while results are flushed) are received
    and ignored for as long as the run lasts, so they cannot interrupt the flush.
    Signals reach only the main thread; a run in another thread (the Python API called
    from a running event loop) leaves them to its host.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
