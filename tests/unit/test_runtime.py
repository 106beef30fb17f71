"""bridge.perf.runtime.tune_gc: what is alive when it runs is frozen, young collections are rarer."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from bridge.perf.runtime import GEN0_THRESHOLD, gc_step, refreeze, tune_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_tune_gc_freezes_start_up_and_raises_the_young_threshold() -> None:
    _, gen1, gen2 = gc.get_threshold()
    survivor = [object() for _ in range(10)]
    tune_gc()
    assert gc.get_threshold() == (GEN0_THRESHOLD, gen1, gen2)
    assert gc.get_freeze_count() >= len(survivor)
    tune_gc(12_345)  # again: idempotent but for the threshold asked
    assert gc.get_threshold() == (12_345, gen1, gen2)


def test_a_tick_collects_whole_once_the_last_full_collection_is_old_enough() -> None:
    assert gc_step(now=100.0, last_full=0.0, full_every_s=600.0) == "freeze"
    assert gc_step(now=600.0, last_full=0.0, full_every_s=600.0) == "full"
    assert gc_step(now=1250.0, last_full=600.0, full_every_s=600.0) == "full"


def test_a_tick_collects_whole_once_as_many_sessions_stopped_as_are_warm() -> None:
    assert gc_step(now=100.0, last_full=0.0, stopped=499, warm=10) == "freeze"  # below the floor
    assert gc_step(now=100.0, last_full=0.0, stopped=500, warm=10) == "full"
    assert gc_step(now=100.0, last_full=0.0, stopped=5_000, warm=10_000) == "freeze"  # a large warm heap
    assert gc_step(now=100.0, last_full=0.0, stopped=10_000, warm=10_000) == "full"


class RecordingCollector:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def collect(self) -> int:
        self.calls.append("collect")
        return 0


async def test_refreeze_freezes_every_tick_and_unfreezes_and_collects_every_full_period() -> None:
    collector, now, reports = RecordingCollector(), [0.0], []

    async def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] > 250:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await refreeze(lambda full_s: reports.append(full_s >= 0), every_s=60.0,
                       full_every_s=120.0, collector=collector, clock=lambda: now[0], sleep=sleep)
    # ticks at 60, 120 (full), 180, 240 (full)
    assert collector.calls == ["freeze", "unfreeze", "collect", "freeze", "freeze", "unfreeze", "collect", "freeze"]
    assert reports == [True, True]  # one report per full collection


@pytest.mark.usefixtures("restored_gc")
async def test_refreeze_on_the_real_collector_freezes_what_survived_and_frees_a_dead_cycle_at_the_full_tick() -> None:
    class Node:
        other: object = None

    kept = [Node(), Node()]
    kept[0].other, kept[1].other = kept[1], kept[0]  # a cycle: only the collector frees it
    probe = weakref.ref(kept[0])
    ticks = [0]

    async def sleep(seconds: float) -> None:
        ticks[0] += 1
        if ticks[0] == 2:
            assert gc.get_freeze_count() > 0  # tick 1 froze the cycle with everything else
            kept.clear()
        if ticks[0] == 3:
            raise asyncio.CancelledError

    gc.collect()
    with pytest.raises(asyncio.CancelledError):
        await refreeze(every_s=1.0, full_every_s=2.0, clock=lambda: float(ticks[0]), sleep=sleep)
    assert probe() is None  # unreachable since tick 1, frozen, freed by tick 2's full collection


async def test_refreeze_collects_whole_under_churn_before_its_period() -> None:
    collector, now, stopped = RecordingCollector(), [0.0], [0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds
        stopped[0] += 300  # sessions stopped per tick; 1,000 warm
        if now[0] > 250:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await refreeze(every_s=60.0, full_every_s=6000.0, churn=lambda: (stopped[0], 1000), collector=collector,
                       clock=lambda: now[0], sleep=sleep)
    # ticks at 60 (300 stopped), 120 (600), 180 (900), 240 (1,200: full), then counting from there
    assert collector.calls == ["freeze", "freeze", "freeze", "unfreeze", "collect", "freeze"]
