"""The store writer task: batches of results committed off the trio thread."""

from __future__ import annotations

import trio

from evalhydra.store.db import Batch, Store

__all__ = ["FLUSH_INTERVAL_S", "store_writer"]

FLUSH_INTERVAL_S = 0.25


async def store_writer(
    rows_rx: trio.MemoryReceiveChannel[Batch],
    store: Store,
    batch_size: int,
    flush_interval: float = FLUSH_INTERVAL_S,
) -> None:
    """The only task that writes: one transaction per ``batch_size`` results or per
    ``flush_interval`` seconds, whichever comes first, committed off the trio thread.

    A crash loses at most the last interval's results, which resume re-runs;
    nothing stored is ever duplicated.
    """
    pending = Batch()
    try:
        async with rows_rx:
            async for batch in rows_rx:
                pending.extend(batch)
                with trio.move_on_after(flush_interval):
                    while len(pending.results) < batch_size:
                        try:
                            pending.extend(await rows_rx.receive())
                        except trio.EndOfChannel:
                            break
                current, pending = pending, Batch()
                await trio.to_thread.run_sync(store.write, current)
    finally:
        with trio.CancelScope(shield=True):
            if len(pending):
                await trio.to_thread.run_sync(store.write, pending)
