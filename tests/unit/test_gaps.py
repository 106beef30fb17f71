"""Seq gaps left by legacy-driven turns (docs/upstream.md §3.1) are found from committed seqs (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bridge.sessions.gaps import find_gaps


def test_contiguous_seqs_have_no_gap() -> None:
    assert find_gaps(0, [1, 2, 3]) == []
    assert find_gaps(5, [6]) == []


def test_a_legacy_turn_before_the_first_v2_event_is_one_gap() -> None:
    # captures/l-legacy-prompt: v2 events continue at seq 17 after a legacy turn used 1-16.
    assert find_gaps(0, [17, 18, 19]) == [(1, 16)]


def test_gaps_inside_a_batch_and_after_the_cursor_are_all_found() -> None:
    assert find_gaps(3, [5, 6, 9]) == [(4, 4), (7, 8)]


def test_replayed_seqs_at_or_below_the_cursor_are_ignored() -> None:
    assert find_gaps(10, [8, 9, 10, 11]) == []
    assert find_gaps(10, []) == []


@given(st.integers(0, 50), st.sets(st.integers(0, 200), max_size=40))
def test_gaps_and_seqs_tile_the_range_exactly(cursor: int, seqs: set[int]) -> None:
    gaps = find_gaps(cursor, seqs)
    new = {s for s in seqs if s > cursor}
    covered = {s for a, b in gaps for s in range(a, b + 1)}
    assert not covered & new
    top = max(new, default=cursor)
    assert covered | new == set(range(cursor + 1, top + 1))
    assert all(a <= b for a, b in gaps)
