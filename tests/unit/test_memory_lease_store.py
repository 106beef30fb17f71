"""bridge.store.chat_sessions.memory: the in-memory twin of the lease store keeps the real one's methods
(names and signatures), covers the Protocols the session parts declare, and follows the same rules as the
SQL (tests/integration/test_leases.py holds the real store to them on PostgreSQL)."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bridge.errors import LeaseHeld, LeaseLost
from bridge.lease import ClaimVerdict
from bridge.sessions.activity import LifecycleStore
from bridge.sessions.keeper import Renewals
from bridge.sessions.sweep import Orphans
from bridge.store.chat_sessions import LeaseStore
from bridge.store.chat_sessions.memory import MemoryLeaseStore
from bridge.store.writes import EventStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def public_methods(cls: type) -> dict[str, Any]:
    return {n: m for n, m in vars(cls).items() if callable(m) and not n.startswith("_")}


def test_every_method_the_twin_shares_with_a_real_store_has_its_signature() -> None:
    twin = public_methods(MemoryLeaseStore)
    real = {**public_methods(EventStore), **public_methods(LeaseStore)}
    shared = sorted(set(twin) & set(real))
    assert len(shared) >= 14
    for name in shared:
        assert inspect.signature(twin[name]) == inspect.signature(real[name]), name
    # what the twin adds is its test set-up (`put`) and the write transaction's fence and cursor (`advance`)
    assert set(twin) - set(real) == {"put", "advance"}


@pytest.mark.parametrize("protocol", [LifecycleStore, Renewals, Orphans])
def test_the_twin_covers_the_protocols_of_the_session_parts(protocol: type) -> None:
    wanted = {n for n in vars(protocol) if not n.startswith("_")}
    assert wanted and wanted <= set(public_methods(MemoryLeaseStore))
    assert wanted <= set(public_methods(LeaseStore))


async def test_a_held_lease_is_refused_an_expired_one_taken_with_a_new_epoch() -> None:
    now = [NOW]
    store = MemoryLeaseStore(clock=lambda: now[0])
    assert await store.claim("ses_A", "a", lease_ttl_s=15) == (1, 0)
    with pytest.raises(LeaseHeld) as held:
        await store.claim("ses_A", "b")
    assert held.value.verdict is ClaimVerdict.HELD
    now[0] += timedelta(seconds=16)
    assert await store.claim("ses_A", "b") == (2, 0)
    with pytest.raises(LeaseLost):
        store.advance("ses_A", 1, 5)  # the first holder is fenced off
    assert store.advance("ses_A", 2, 5) == 5 and await store.stored_cursor("ses_A") == 5


async def test_only_the_holder_writes_a_status_and_deletion_is_terminal() -> None:
    store = MemoryLeaseStore(clock=lambda: NOW)
    await store.claim("ses_A", "a")
    assert not await store.set_status("ses_A", "b", "running", None)
    assert await store.set_status("ses_A", "a", "running", None)
    await store.mark_deleted("ses_A")
    assert not await store.set_status("ses_A", "a", "idle", None)
    with pytest.raises(LeaseHeld):
        await store.claim("ses_A", "a")
    assert [j for j in store.journal if j[0] == "status"] == [("status", "ses_A", "running", None),
                                                              ("status", "ses_A", "deleted", None)]


async def test_parking_gives_the_lease_back_unless_a_peer_holds_it() -> None:
    store = MemoryLeaseStore(clock=lambda: NOW)
    await store.claim("ses_A", "a")
    assert not await store.park("ses_A", "b", "stuck")
    assert await store.park("ses_A", "a", "stuck")
    assert [(r.session_id, r.status_reason) for r in await store.parked()] == [("ses_A", "stuck")]
    assert await store.heartbeat("a", "host", 1, 15) == {}


async def test_a_renewal_never_revives_a_lease_a_peer_took_and_a_hand_off_offers_ours() -> None:
    now = [NOW]
    store = MemoryLeaseStore(clock=lambda: now[0])
    await store.claim("ses_A", "a")
    await store.claim("ses_B", "a")
    now[0] += timedelta(seconds=20)
    await store.claim("ses_B", "b")  # expired: b takes it
    assert await store.heartbeat("a", "host", 1, 15) == {"ses_A": 1}
    await store.hand_off("a")
    rows = await store.adoption_candidates("b")
    assert [(r.session_id, r.lease_owner, r.lease_expired) for r in rows] == [("ses_A", "a", True)]


async def test_the_turn_state_is_the_tail_since_the_last_prompt_and_gaps_mark_the_session() -> None:
    store = MemoryLeaseStore()
    await store.claim("ses_A", "a")
    store.advance("ses_A", 1, 4, ["prompt:started", "step:finish", "prompt:admitted", "step:start"])
    assert (await store.turn_state("ses_A")).tail_kinds == ["prompt:admitted", "step:start"]
    await store.record_gap("ses_A", 2, 3)
    assert await store.gaps("ses_A") == [(2, 3)] and store.rows["ses_A"].incomplete
