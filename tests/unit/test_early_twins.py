"""What /global/event showed while a follower was being started (bridge.upstream.early_twins): it covers
the cursor only when the lowest seq seen is at most cursor + 1, on one connection, within the cap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bridge.events import Envelope
from bridge.upstream.early_twins import EarlyTwins


def _twin(seq: int) -> Envelope:
    return Envelope(id=f"evt_{seq}", type="message.updated", seq=seq, version=1, aggregate_id="ses_A",
                    session_id="ses_A", data={}, raw={"seq": seq})


@given(exact=st.sets(st.integers(0, 60), max_size=20), announced=st.sets(st.integers(0, 60), max_size=20),
       cursor=st.integers(-1, 60))
def test_covered_exactly_when_the_lowest_seq_seen_is_at_most_the_next_one(exact: set[int], announced: set[int],
                                                                         cursor: int) -> None:
    e = EarlyTwins()
    for s in sorted(exact):
        e.twin(_twin(s))
    for s in sorted(announced):
        e.seen(s)
    seen = exact | announced
    assert e.covers(cursor) == (bool(seen) and min(seen) <= cursor + 1)
    assert set(e.exact) == exact and e.announced == announced


def test_nothing_seen_covers_nothing() -> None:
    assert not EarlyTwins().covers(-1)
    assert not EarlyTwins().covers(10)


def test_a_reconnect_loses_everything_and_covers_nothing_after() -> None:
    e = EarlyTwins()
    e.twin(_twin(0))
    e.lost()
    e.twin(_twin(1))  # shown after the reconnect: the hole before it may hold anything
    e.seen(2)
    assert not e.covers(-1) and not e.covers(5)
    assert e.exact == {} and e.announced == set()


def test_more_than_the_cap_is_lost() -> None:
    e = EarlyTwins(cap=3)
    for s in range(3):
        e.twin(_twin(s))
    assert e.covers(-1)
    e.seen(3)
    assert not e.covers(-1) and e.exact == {}
