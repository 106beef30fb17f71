"""Process-wide tuning the daemon applies first thing (and the benchmarks apply the same way).

The garbage collector: ingest allocates many short-lived containers per event (decoded JSON, rows),
none of which form cycles; with CPython's default gen-0 threshold (700 allocations) a burst of events
pays a young collection every few events, each traversing the long-lived objects promoted so far.
`tune_gc()` moves what is alive before the daemon builds anything (modules, settings) into the permanent
generation (`gc.freeze()`, never scanned again) and raises the gen-0 threshold; reference counting
still frees the acyclic garbage at once (docs/operations.md, "Garbage collector": why 5000). It runs
before the daemon builds anything that can die (followers, tasks, connections): a frozen object is never
collected, and a cycle through one (a finished follower's task and its exception) would never be either.
"""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 5_000  # allocations between young collections (CPython's default: 700); docs/operations.md


def tune_gc(gen0: int = GEN0_THRESHOLD) -> None:
    """Freeze what is alive now and collect the young generation less often. Idempotent."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0, gen1, gen2)
