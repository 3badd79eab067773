"""What a queue of items to mark by hand shares (the judge's label queue, the simulator audit):
the next one nobody marked past a position, and how far the marking got."""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from typing import Protocol, TypeVar

__all__ = ["Queued", "next_pending"]


class Queued(Protocol):
    """An item with its place in a queue."""

    @property
    def position(self) -> int:
        """Its place, from 0."""
        ...


Item = TypeVar("Item", bound=Queued)


def next_pending(queue: Sequence[Item], done: Container[object], key: Callable[[Item], object],
                 after: int = -1) -> tuple[Item | None, int, int]:
    """The first item past ``after`` whose ``key`` is not in ``done``, how many of the queue are
    done, and its size."""
    marked = sum(1 for item in queue if key(item) in done)
    following = next((item for item in queue if item.position > after and key(item) not in done), None)
    return following, marked, len(queue)
