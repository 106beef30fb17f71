"""bridge.upstream.twin_hold: twins above a hole of announced v2 seqs wait for the durable stream; a hole
nobody announced is asked for after the debounce (docs/mirror.md rule 3)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bridge.upstream.twin_hold import MAX_EXPLAINED_SPAN, forget_through, hole_explained, hole_wait


def wait(cursor: int, waiting: set[int], announced: set[int]) -> float:
    return hole_wait(cursor, waiting, announced, debounce_s=0.03, hold_s=0.5)


def test_a_hole_of_announced_v2_seqs_is_held_for_the_durable_stream() -> None:
    # cursor 3; v2 seqs 4-6 announced, legacy twin 7 waiting: the durable stream brings 4-6
    assert wait(3, {7}, {4, 5, 6}) == 0.5
    # legacy twins 7 and 9 wait, 8 is announced v2
    assert wait(3, {7, 9}, {4, 5, 6, 8}) == 0.5


def test_a_seq_nobody_announced_is_asked_for_after_the_debounce() -> None:
    assert wait(3, {7}, {4, 6}) == 0.03  # 5: a twin lost on /global/event, only the log has it
    assert wait(3, {7, 10}, {4, 5, 6}) == 0.03  # 8, 9 missing between the twins
    assert wait(3, {7}, set()) == 0.03  # a reconnect lost everything before 7


def test_the_hold_is_never_shorter_than_the_debounce() -> None:
    assert hole_wait(3, {7}, {4, 5, 6}, debounce_s=0.2, hold_s=0.1) == 0.2


def test_the_process_backlog_lengthens_the_hold_of_an_explained_hole_only() -> None:
    """Under load every durable stream comes late: an announced hole is waited for that much longer; a seq
    nobody announced is asked for after the debounce whatever the load."""
    assert hole_wait(3, {7}, {4, 5, 6}, debounce_s=0.03, hold_s=3.0, backlog_s=25.0) == 28.0
    assert hole_wait(3, {7}, {4, 6}, debounce_s=0.03, hold_s=3.0, backlog_s=25.0) == 0.03
    assert hole_wait(3, {7}, {4, 5, 6}, debounce_s=0.03, hold_s=3.0) == 3.0


def test_a_very_wide_hole_is_not_looked_into() -> None:
    announced = set(range(1, MAX_EXPLAINED_SPAN + 10))
    assert hole_explained(0, {MAX_EXPLAINED_SPAN}, announced)
    assert not hole_explained(0, {MAX_EXPLAINED_SPAN + 1}, announced)


def test_nothing_waiting_explains_itself() -> None:
    assert hole_explained(3, set(), set())


def test_forget_through_drops_what_is_stored() -> None:
    seqs = {2, 4, 5, 9}
    forget_through(seqs, 4)
    assert seqs == {5, 9}


@given(st.integers(0, 50), st.sets(st.integers(0, 80), max_size=30), st.sets(st.integers(0, 80), max_size=60))
def test_explained_means_every_missing_seq_is_waiting_or_announced(cursor: int, waiting: set[int],
                                                                  announced: set[int]) -> None:
    waiting = {s for s in waiting if s > cursor}
    missing = set(range(cursor + 1, max(waiting, default=cursor))) - waiting
    assert hole_explained(cursor, waiting, announced) == (missing <= announced)


def test_seqs_the_live_stream_has_not_shown_yet_explain_a_hole_below_durable_events() -> None:
    # durable 6 waits above 4 and 5; /global/event has shown up to 3: they are on their way
    assert hole_explained(3, {6}, set(), live_top=3)
    assert hole_explained(3, {6}, {5}, live_top=5) is False  # 4 was shown past (5 announced): lost
    assert hole_explained(3, {6}, {4, 5}, live_top=5)
    assert hole_explained(3, {6}, set()) is False  # no live_top: every missing seq must be waiting or announced
