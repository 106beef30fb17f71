"""Seq gaps (pure). Legacy-endpoint turns burn durable seqs that never reach the durable stream
(docs/upstream.md §3.1, §11.8): a jump in the committed seqs means the mirror is incomplete there."""

from __future__ import annotations

from collections.abc import Iterable


def find_gaps(cursor: int, seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Missing ranges (inclusive) between `cursor` (last seq stored before) and the new seqs.
    Seqs at or below the cursor (replays) are ignored."""
    gaps: list[tuple[int, int]] = []
    last = cursor
    for seq in sorted(set(seqs)):
        if seq <= last:
            continue
        if seq > last + 1:
            gaps.append((last + 1, seq - 1))
        last = seq
    return gaps
