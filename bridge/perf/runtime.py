"""Process-wide tuning the daemon applies first thing (and the benchmarks apply the same way).

The garbage collector: ingest allocates many short-lived containers per event (decoded JSON, rows),
none of which form cycles; with CPython's default gen-0 threshold (700 allocations) a burst of events
pays a young collection every few events, each traversing the long-lived objects promoted so far.
`tune_gc()` moves what is alive before the daemon builds anything (modules, settings) into the permanent
generation (`gc.freeze()`, never scanned again) and raises the gen-0 threshold; reference counting
still frees the acyclic garbage at once (docs/operations.md, "Garbage collector": why 5000). It runs
before the daemon builds anything that can die (followers, tasks, connections): a frozen object is never
collected, and a cycle through one (a finished follower's task and its exception) would never be either.

`refreeze()` (a task of the daemon) then keeps the heap of a warm daemon out of the collector's way: with
10,000 warm sessions the heap holds ~1.5 million objects, and every full collection traverses all of them
(0.7 to 1.5 s each on this machine, tens of them during a warm-up and a burst: 53 s of 134 s of CPU in one
10k run of `bench.wire`, BENCHMARKS.md). Every `REFREEZE_EVERY_S` what survived is frozen too, so the
collections after it traverse only what is new; every `FULL_COLLECT_EVERY_S` everything is unfrozen and
collected once (one pause of that size), so the cycles of what died meanwhile — a stopped follower's task
and its exception — are reclaimed within that time instead of never; and sooner under churn: once as many
sessions stopped as are warm (`FULL_COLLECT_AFTER_STOPPED`).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

GEN0_THRESHOLD = 5_000  # allocations between young collections (CPython's default: 700); docs/operations.md
REFREEZE_EVERY_S = 60.0  # what survived this long is frozen (docs/operations.md, "Garbage collector")
FULL_COLLECT_EVERY_S = 600.0  # everything unfrozen and collected once: the cycles of what died are freed


def tune_gc(gen0: int = GEN0_THRESHOLD) -> None:
    """Freeze what is alive now and collect the young generation less often. Idempotent."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0, gen1, gen2)


# A full collection also comes once as many sessions stopped since the last one as are warm now (at least
# this many): what a stopped follower leaves in cycles through frozen objects is reclaimed then, so under
# churn the garbage stays about the size of the warm heap (docs/operations.md "Memory for weeks"); each
# collection costs about what the warm heap is, so a stopped session costs a constant share of one.
FULL_COLLECT_AFTER_STOPPED = 500


def gc_step(now: float, last_full: float, full_every_s: float = FULL_COLLECT_EVERY_S, *, stopped: int = 0,
            warm: int = 0) -> Literal["freeze", "full"]:
    """What a refreeze tick does (pure): a full collection when the last one is `full_every_s` old, or when
    `stopped` sessions (since the last one) reach the warm count, at least `FULL_COLLECT_AFTER_STOPPED`."""
    if now - last_full >= full_every_s or stopped >= max(FULL_COLLECT_AFTER_STOPPED, warm):
        return "full"
    return "freeze"


class Collector(Protocol):
    """The part of the `gc` module `refreeze` uses (a recording twin in unit tests)."""

    def freeze(self) -> None: ...
    def unfreeze(self) -> None: ...
    def collect(self) -> int: ...


async def refreeze(report: Callable[[float], None] = lambda full_s: None, *,
                   every_s: float = REFREEZE_EVERY_S, full_every_s: float = FULL_COLLECT_EVERY_S,
                   churn: Callable[[], tuple[int, int]] = lambda: (0, 0),
                   collector: Collector = gc, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Forever: every `every_s` freeze what is alive; every `full_every_s`, or once as many sessions stopped
    as are warm (`churn()`: sessions stopped so far, warm now), unfreeze and collect first.
    `report(seconds)` after each full collection (the metric). Not the frozen count: `gc.get_freeze_count()`
    walks the whole permanent generation (0.2 s at 10,000 warm sessions)."""
    last_full = clock()
    stopped_at_full = churn()[0]
    while True:
        await sleep(every_s)
        now = clock()
        stopped, warm = churn()
        if gc_step(now, last_full, full_every_s, stopped=stopped - stopped_at_full, warm=warm) == "full":
            collector.unfreeze()
            started = time.perf_counter()
            collector.collect()
            report(time.perf_counter() - started)
            last_full, stopped_at_full = now, stopped
        collector.freeze()
