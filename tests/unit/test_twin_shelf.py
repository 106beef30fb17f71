"""What waits above one session's cursor (bridge.upstream.twin_shelf), pure: twins wait only above the
cursor, leave in seq order and contiguous from the cursor, fill a batch's holes, and durable events above a
hole wait only when `/global/event` has not shown the seqs missing below them yet."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from bridge.events import Envelope, parse_envelope
from bridge.upstream.twin_shelf import MAX_PENDING_TWINS, TwinShelf
from tests.support.memory_upstream import envelope

SID = "ses_A"


def env(seq: int) -> Envelope:
    return parse_envelope(envelope(SID, seq))


def test_twins_at_or_below_the_cursor_do_not_wait() -> None:
    shelf = TwinShelf()
    shelf.offer(env(3), cursor=3)
    shelf.offer(env(5), cursor=3)
    assert shelf.waiting() == {5} and shelf.fed and bool(shelf)


def test_what_continues_the_cursor_leaves_in_order_and_the_rest_waits() -> None:
    shelf = TwinShelf()
    for s in (4, 2, 3, 6):
        shelf.offer(env(s), cursor=1)
    assert [e.seq for e in shelf.take_next(1)] == [2, 3, 4]
    assert shelf.waiting() == {6}
    assert [e.seq for e in shelf.fill(4, [env(5), env(7)])] == [6]
    assert [e.seq for e in shelf.take(frozenset({6, 9}), cursor=4)] == [6] and not shelf


def test_taking_all_empties_the_shelf_and_forgetting_drops_what_is_stored() -> None:
    shelf = TwinShelf()
    for s in (3, 5, 8):
        shelf.offer(env(s), cursor=1)
    shelf.announce(4, cursor=1)
    shelf.forget_through(5)
    assert shelf.waiting() == {8}
    assert [e.seq for e in shelf.take(None, cursor=5)] == [8] and not shelf


def test_durable_events_above_a_hole_wait_only_for_seqs_not_shown_yet() -> None:
    shelf = TwinShelf()
    assert not shelf.hold_ahead(1, [env(4)])  # /global/event never showed this session: nothing says it will
    shelf.offer(env(2), cursor=1)  # shown up to 2
    assert shelf.hold_ahead(2, [env(4)])  # 3 not shown yet: on its way
    assert shelf.waiting() == {2, 4}
    shelf.announce(6, cursor=2)  # shown up to 6; 5 never announced as v2: only the log has it
    assert not shelf.hold_ahead(2, [env(7)])


def test_too_many_waiting_twins_are_dropped_and_the_drop_is_told_once() -> None:
    shelf = TwinShelf()
    for s in range(2, MAX_PENDING_TWINS + 3):
        shelf.offer(env(s), cursor=0)
    assert len(shelf.waiting()) < MAX_PENDING_TWINS and shelf.take_overflow() and not shelf.take_overflow()


async def test_the_bell_wakes_the_waiter_once() -> None:
    shelf = TwinShelf()
    waiter = asyncio.create_task(shelf.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    shelf.offer(env(5), cursor=0)
    await asyncio.wait_for(waiter, 5)
    await shelf.wait(timeout=0.001)  # silent again: only the timeout ends this one


async def test_a_timed_wait_takes_an_earlier_ring_at_once_and_its_timer_never_rings_later() -> None:
    shelf = TwinShelf()
    shelf.ring()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await shelf.wait(timeout=30)  # rung before: no waiting
    assert loop.time() - t0 < 5
    await shelf.wait(timeout=0.001)  # timed out (nobody rang) and silent afterwards
    waiter = asyncio.create_task(shelf.wait(timeout=0.05))
    await asyncio.sleep(0)
    shelf.ring()
    await asyncio.wait_for(waiter, 5)  # rung: over before its timeout
    await asyncio.sleep(0.1)  # past that wait's due time: its timer was cancelled, the bell stays silent
    late = asyncio.create_task(shelf.wait())
    for _ in range(3):
        await asyncio.sleep(0)
    assert not late.done()
    late.cancel()


@given(st.sets(st.integers(1, 40)), st.integers(0, 40))
def test_take_next_is_the_contiguous_run_from_the_cursor(seqs: set[int], cursor: int) -> None:
    shelf = TwinShelf()
    for s in seqs:
        shelf.offer(env(s), cursor)
    taken = [e.seq for e in shelf.take_next(cursor)]
    assert taken == list(range(cursor + 1, cursor + 1 + len(taken)))
    above = {s for s in seqs if s > cursor}
    assert set(taken) | shelf.waiting() == above and cursor + len(taken) + 1 not in shelf.waiting()
