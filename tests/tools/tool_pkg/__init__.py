"""Tools the tool-loop tests offer: functions, slow and failing ones, and a class with state."""

from __future__ import annotations

import time
from typing import Any

import trio


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def slow_async(seconds: float) -> str:
    """Wait, then answer (cancelled at the tool's timeout)."""
    await trio.sleep(seconds)
    return "done"


def slow_sync(seconds: float) -> str:
    """Block, then answer (left behind at the tool's timeout)."""
    time.sleep(seconds)
    return "done"


def broken(reason: str) -> str:
    """Always raises."""
    raise RuntimeError(f"broken: {reason}")


def blob(kind: str) -> Any:
    """Results of awkward types."""
    return {"bytes": b"ok \xff\xfe", "surrogate": "half \udcff", "big": "x" * 50_000, "none": None,
            "object": {"a": [1, 2]}}[kind]


STAMPS: list[tuple[str, float]] = []


async def stamp(label: str) -> str:
    """Record when it ran (the parallel tests read it)."""
    STAMPS.append((label, trio.current_time()))
    await trio.sleep(0.1)
    STAMPS.append((label + " done", trio.current_time()))
    return label


class Counter:
    """A stateful tool class."""

    def __init__(self) -> None:
        self.count = 0

    def bump(self, by: int = 1) -> int:
        """Add to the counter."""
        self.count += by
        return self.count

    def _hidden(self) -> None:
        """Not offered."""

    def state(self) -> dict[str, int]:
        """The counter now."""
        return {"count": self.count}
