"""Leases in PostgreSQL: conditional claim, heartbeat renewal, expiry, hand-off, adoption candidates,
status written only by the holder, legacy gaps (docs/lifecycle.md)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.errors import LeaseHeld, LeaseLost
from bridge.lease import ClaimVerdict
from bridge.store.chat_sessions import LeaseStore
from bridge.store.db import make_engine
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT, SESSION, batch, chat_event
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

from .conftest import UPSTREAM

A = "host-a:100:aaaaaaaaaaaa"
B = "host-b:200:bbbbbbbbbbbb"


@pytest.fixture
def leases(engine: AsyncEngine) -> LeaseStore:
    return LeaseStore(engine, UPSTREAM)


async def test_a_lease_held_by_a_live_peer_is_refused_and_nothing_moves(store: EventStore) -> None:
    epoch, _ = await store.claim(SESSION, A, lease_ttl_s=60)

    with pytest.raises(LeaseHeld) as refused:
        await store.claim(SESSION, B, lease_ttl_s=60)

    assert (refused.value.verdict, refused.value.holder) == (ClaimVerdict.HELD, A)
    row = await store.get_session(SESSION)
    assert row is not None and (row.lease_owner, row.lease_epoch) == (A, epoch)
    assert (await store.write_batch(SESSION, epoch, batch(1), RECEIVED_AT)).inserted == 1


async def test_an_expired_lease_is_taken_over_with_a_new_epoch_that_fences_the_old_owner(store: EventStore) -> None:
    old, _ = await store.claim(SESSION, A, lease_ttl_s=0.3)
    await store.write_batch(SESSION, old, batch(1, 2), RECEIVED_AT)

    async def taken() -> tuple[int, int] | None:
        try:
            return await store.claim(SESSION, B, lease_ttl_s=60)
        except LeaseHeld:
            return None

    new, cursor = await wait_until(taken, 10, 0.05, message="lease expired and taken")
    assert (new, cursor) == (old + 1, 2)
    with pytest.raises(LeaseLost):
        await store.write_batch(SESSION, old, batch(3), RECEIVED_AT)
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 2]


async def test_reclaiming_our_own_lease_moves_the_epoch_on(store: EventStore) -> None:
    first, _ = await store.claim(SESSION, A, lease_ttl_s=60)
    second, _ = await store.claim(SESSION, A, lease_ttl_s=60)
    assert second == first + 1
    with pytest.raises(LeaseLost):
        await store.write_batch(SESSION, first, batch(1), RECEIVED_AT)


async def test_a_holder_known_dead_is_taken_over_before_expiry(store: EventStore) -> None:
    await store.claim(SESSION, A, lease_ttl_s=60)
    epoch, _ = await store.claim(SESSION, B, lease_ttl_s=60, holder_dead=lambda owner: owner == A)
    row = await store.get_session(SESSION)
    assert row is not None and (row.lease_owner, row.lease_epoch) == (B, epoch)


async def test_a_deleted_session_is_never_claimed(store: EventStore) -> None:
    await store.mark_deleted(SESSION)
    with pytest.raises(LeaseHeld) as refused:
        await store.claim(SESSION, A)
    assert refused.value.verdict is ClaimVerdict.DELETED


async def test_heartbeat_renews_only_the_unexpired_leases_we_hold(store: EventStore, leases: LeaseStore) -> None:
    e1, _ = await store.claim("ses_1", A, lease_ttl_s=60)
    await store.claim("ses_2", A, lease_ttl_s=60)
    await store.claim("ses_3", B, lease_ttl_s=60)
    await store.claim("ses_2", B, holder_dead=lambda _owner: True)  # taken from us

    held = await leases.heartbeat(A, "host-a", 100, 60)

    assert held == {"ses_1": e1}
    assert [i["incarnation_id"] for i in await leases.incarnations()] == [A]


async def _lapsed(leases: LeaseStore, session_id: str) -> bool:
    """The lease expired by the database clock (what a peer's sweep sees)."""
    return any(c.session_id == session_id and c.lease_expired for c in await leases.adoption_candidates(B))


async def test_a_lapsed_lease_nobody_took_is_renewed_with_its_epoch(store: EventStore, leases: LeaseStore) -> None:
    epoch, _ = await store.claim(SESSION, A, lease_ttl_s=0.2)
    await wait_until(lambda: _lapsed(leases, SESSION), 10, 0.1, message="lease lapsed")

    # A heartbeat that came late (a busy pool, a paused process): nobody took the lease, the epoch did not
    # move, so it is still ours and renewing it keeps the follower instead of stopping and re-claiming.
    assert await leases.heartbeat(A, "host-a", 100, 60) == {SESSION: epoch}
    assert not await _lapsed(leases, SESSION)


async def test_a_lapsed_lease_a_peer_took_is_not_renewed_by_a_late_heartbeat(
    store: EventStore, leases: LeaseStore
) -> None:
    await store.claim(SESSION, A, lease_ttl_s=0.2)
    await wait_until(lambda: _lapsed(leases, SESSION), 10, 0.1, message="lease lapsed")
    taken, _ = await store.claim(SESSION, B, lease_ttl_s=60)  # adopted by a peer

    assert SESSION not in await leases.heartbeat(A, "host-a", 100, 60)
    row = await store.get_session(SESSION)
    assert row is not None and row.lease_owner == B and row.lease_epoch == taken


async def test_the_heartbeat_on_its_own_pool_is_not_queued_behind_a_busy_main_pool(
    database_url: str, store: EventStore
) -> None:
    main = make_engine(database_url, pool_size=1, max_overflow=0)
    liveness = make_engine(database_url, pool_size=1, max_overflow=0)
    try:
        leases = LeaseStore(main, UPSTREAM, liveness_engine=liveness)
        epoch, _ = await store.claim(SESSION, A, lease_ttl_s=60)
        async with main.connect():  # every connection of the main pool is busy (a burst of write batches)
            held = await asyncio.wait_for(leases.heartbeat(A, "host-a", 100, 60), 10)
        assert held == {SESSION: epoch}
    finally:
        await main.dispose()
        await liveness.dispose()


async def test_hand_off_expires_our_leases_at_once_and_makes_them_orphans(
    store: EventStore, leases: LeaseStore
) -> None:
    await store.claim("ses_1", A, lease_ttl_s=60)
    await store.claim("ses_2", B, lease_ttl_s=60)
    await leases.register(A, "host-a", 100, 60)

    await leases.hand_off(A)

    candidates = {c.session_id: c for c in await leases.adoption_candidates(B)}
    assert set(candidates) == {"ses_1"} and candidates["ses_1"].lease_expired and candidates["ses_1"].lease_owner == A
    assert await store.claim("ses_1", B, lease_ttl_s=60)
    (inc,) = await leases.incarnations()
    assert inc["stopped_at"] is not None and not inc["alive"]


async def test_released_sessions_are_candidates_only_when_last_known_running(
    store: EventStore, leases: LeaseStore
) -> None:
    e1, _ = await store.claim("ses_idle", A)
    e2, _ = await store.claim("ses_running", A)
    await leases.set_status("ses_running", A, "running", None)
    await store.release("ses_idle", e1)
    await store.release("ses_running", e2)

    candidates = await leases.adoption_candidates(B)
    assert [(c.session_id, c.lease_owner) for c in candidates] == [("ses_running", None)]


async def test_only_the_lease_holder_writes_the_status(store: EventStore, leases: LeaseStore) -> None:
    await store.claim(SESSION, A)
    await store.claim(SESSION, B, holder_dead=lambda _owner: True)

    assert not await leases.set_status(SESSION, A, "interrupted", "stale owner")
    assert await leases.set_status(SESSION, B, "stalled", "no step")
    row = await store.get_session(SESSION)
    assert row is not None and (row.status, row.status_reason) == ("stalled", "no step")


async def test_turn_state_returns_the_stored_status_and_the_tail_since_the_last_prompt(
    store: EventStore, leases: LeaseStore
) -> None:
    epoch, _ = await store.claim(SESSION, A)
    kinds = ["prompt:admitted", "prompt:started", "step:start", "step:end", "prompt:started", "step:start"]
    events = [chat_event(i + 1, kind=k) for i, k in enumerate(kinds)]
    await store.write_batch(SESSION, epoch, events, RECEIVED_AT)
    await leases.set_status(SESSION, A, "running", None)

    state = await leases.turn_state(SESSION)
    assert state.status == "running"
    assert state.tail_kinds == ["prompt:started", "step:start"]


async def test_a_gap_marks_the_session_incomplete_and_is_recorded_once(store: EventStore, leases: LeaseStore) -> None:
    await store.claim(SESSION, A)
    await leases.record_gap(SESSION, 1, 16)
    await leases.record_gap(SESSION, 1, 16)
    assert await leases.gaps(SESSION) == [(1, 16)]
    row = await store.get_session(SESSION)
    assert row is not None and row.incomplete
