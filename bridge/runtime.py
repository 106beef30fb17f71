"""Process-wide tuning the daemon applies once it has started (and the benchmarks apply the same way).

The garbage collector: ingest allocates many short-lived containers per event (decoded JSON, rows),
none of which form cycles; with CPython's default gen-0 threshold (700 allocations) a burst of events
pays a young collection every few events, each traversing the long-lived objects promoted so far.
`tune_gc()` moves everything alive after start-up (modules, settings, engines) into the permanent
generation (`gc.freeze()`, never scanned again) and raises the gen-0 threshold; reference counting
still frees the acyclic garbage at once (docs/operations.md, "Garbage collector": why 5000).
"""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 5_000  # allocations between young collections (CPython's default: 700); docs/operations.md


def tune_gc(gen0: int = GEN0_THRESHOLD) -> None:
    """Freeze what start-up left alive and collect the young generation less often. Idempotent."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0, gen1, gen2)
