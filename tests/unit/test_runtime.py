"""bridge.perf.runtime.tune_gc: what is alive when it runs is frozen, young collections are rarer."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from bridge.perf.runtime import GEN0_THRESHOLD, tune_gc


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
