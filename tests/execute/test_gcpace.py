"""The collector's pace while cells run: fewer young collections, the caller's pace restored."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from omegaconf import DictConfig

from evalhydra.execute.gcpace import RUN_GEN0_THRESHOLD, RunGcPace
from evalhydra.execute.runner import execute
from evalhydra.plan.build import build_plan
from evalhydra.plan.cells import count_cells
from evalhydra.services.mock import MockSettings, serve
from evalhydra.store.db import open_store
from tests.helpers import numbered_registry


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The thresholds this process had, put back after the test whatever it did."""
    saved = gc.get_threshold()
    yield saved
    gc.set_threshold(*saved)


def test_the_pace_holds_until_the_last_overlapping_run_ends(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(700, 10, 10)
    first, second = RunGcPace(), RunGcPace()
    first.__enter__()
    assert gc.get_threshold() == (RUN_GEN0_THRESHOLD, 10, 10)
    with second:
        first.__exit__(None, None, None)  # the first run ends while the second still runs
        assert gc.get_threshold() == (RUN_GEN0_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_caller_s_slower_pace_or_disabled_collection_is_kept(thresholds: tuple[int, int, int]) -> None:
    for caller in ((50_000, 20, 5), (0, 10, 10)):
        gc.set_threshold(*caller)
        with RunGcPace():
            assert gc.get_threshold() == caller
        assert gc.get_threshold() == caller


async def test_a_run_executes_at_the_run_pace_and_restores_the_caller_s(
    compose: Callable[..., DictConfig], tmp_path: Path, autojump_clock: trio.testing.MockClock,
    thresholds: tuple[int, int, int],
) -> None:
    gc.set_threshold(700, 10, 10)
    registry = numbered_registry(tmp_path / "reg", 2)
    seen = []
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, MockSettings(fault="hang"))
        plan = build_plan(compose(f"registry={registry}", "service=mock", "service.mock.enabled=false",
                                  f"service.base_url={server.url}", "service.timeout_ms=30000",
                                  "service.retry.max_attempts=1", "eval=g"))

        async def sample() -> None:
            await trio.sleep(10)  # virtual time: the cells hang for 30 s
            seen.append(gc.get_threshold())

        nursery.start_soon(sample)
        store = open_store(plan.store_path)
        outcome = await execute(plan, store, total=count_cells(plan))
        store.close()
        nursery.cancel_scope.cancel()
    assert outcome.executed == 2
    assert seen == [(RUN_GEN0_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)


def test_what_a_run_leaves_in_reference_cycles_is_collected_when_it_ends(
        thresholds: tuple[int, int, int]) -> None:
    class Node:
        other: object = None

    with RunGcPace():
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
    assert alive() is None
