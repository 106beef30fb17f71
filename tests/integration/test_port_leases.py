"""The lease port's contract (bridge.store.ports.leases, docs/ports.md), run on PostgreSQL and on the
in-memory twin alike: claims and epochs that fence, release, the stored cursor, the deletion tombstone,
renewal, hand-off and adoption."""

from __future__ import annotations

import pytest

from bridge.errors import LeaseHeld, LeaseLost
from bridge.lease import ClaimVerdict
from bridge.store.ports import Claim, ClaimAsk
from tests.support.store_ports import Backend, Event

A, B = "host-a:1:aaaa", "host-b:2:bbbb"


async def test_a_claim_creates_the_session_with_epoch_1_and_keeps_a_known_directory(backend: Backend) -> None:
    leases = backend.leases()
    assert await leases.claim("ses_A", A, "/work/dir") == (1, 0)
    assert await leases.claim("ses_A", A) == (2, 0)  # ours: a new follower supersedes the old one
    row = await backend.row("ses_A")
    assert row is not None
    assert (row["lease_owner"], row["lease_epoch"], row["directory"], row["status"]) == (A, 2, "/work/dir", "idle")


async def test_a_held_lease_is_refused_an_expired_one_taken_and_the_old_epoch_fenced(backend: Backend) -> None:
    leases = backend.leases()
    assert await leases.claim("ses_A", A) == (1, 0)
    with pytest.raises(LeaseHeld) as held:
        await leases.claim("ses_A", B)
    assert (held.value.verdict, held.value.holder) == (ClaimVerdict.HELD, A)
    await backend.expire_lease("ses_A")
    assert await leases.claim("ses_A", B) == (2, 0)
    with pytest.raises(LeaseLost):
        await backend.store_events("ses_A", 1, [Event(1, "text:end")])
    await backend.store_events("ses_A", 2, [Event(1, "text:end"), Event(5, "text:end")])
    assert await leases.stored_cursor("ses_A") == 5


async def test_a_dead_holders_lease_is_taken_and_the_claim_answers_the_stored_cursor(backend: Backend) -> None:
    leases = backend.leases()
    epoch, _ = await leases.claim("ses_A", A)
    await backend.store_events("ses_A", epoch, [Event(1, "text:end"), Event(7, "text:end")])
    assert await leases.claim("ses_A", B, holder_dead=lambda holder: holder == A) == (2, 7)


async def test_a_batch_answers_each_ask_in_order_with_the_stored_status(backend: Backend) -> None:
    leases, status = backend.leases(), backend.status()
    await leases.claim("ses_B", A)
    assert await status.set_status("ses_B", A, "waiting", "permission: bash")
    await leases.claim("ses_C", B)
    outcomes = await leases.claim_many([ClaimAsk("ses_C"), ClaimAsk("ses_B", "/d/b"), ClaimAsk("ses_A")], A)
    c, b, a = outcomes
    assert isinstance(c, LeaseHeld) and c.verdict is ClaimVerdict.HELD
    assert isinstance(b, Claim) and (b.epoch, b.verdict, b.previous_owner) == (2, ClaimVerdict.OURS, A)
    assert (b.status, b.status_reason) == ("waiting", "permission: bash")
    assert isinstance(a, Claim) and (a.epoch, a.verdict, a.previous_owner, a.status) == (1, ClaimVerdict.FREE,
                                                                                        None, "idle")
    with pytest.raises(ValueError, match="twice"):
        await leases.claim_many([ClaimAsk("ses_A"), ClaimAsk("ses_A")], A)


async def test_a_directory_postgresql_cannot_hold_is_dropped_not_refused(backend: Backend) -> None:
    leases = backend.leases()
    assert await leases.claim("ses_A", A, "/bad\x00dir") == (1, 0)
    row = await backend.row("ses_A")
    assert row is not None and row["directory"] is None


async def test_a_release_gives_up_only_the_epoch_that_holds_and_keeps_the_cursor(backend: Backend) -> None:
    leases = backend.leases()
    await leases.claim("ses_A", A)
    await backend.store_events("ses_A", 1, [Event(3, "text:end")])
    await leases.claim("ses_A", A)  # epoch 2
    await leases.release("ses_A", 1)
    row = await backend.row("ses_A")
    assert row is not None and row["lease_owner"] == A
    await leases.release("ses_A", 2)
    row = await backend.row("ses_A")
    assert row is not None and (row["lease_owner"], row["cursor_seq"]) == (None, 3)
    assert await leases.stored_cursor("ses_A") == 3
    assert await leases.stored_cursor("ses_unknown") is None
    assert await leases.claim("ses_A", B) == (3, 3)  # free: anyone takes it


async def test_the_tombstone_is_terminal_even_for_a_session_never_seen(backend: Backend) -> None:
    leases = backend.leases()
    await leases.mark_deleted("ses_new")
    await leases.mark_deleted("ses_new")  # twice: nothing changes
    row = await backend.row("ses_new")
    assert row is not None and (row["deleted"], row["status"]) == (True, "deleted")
    with pytest.raises(LeaseHeld) as held:
        await leases.claim("ses_new", A)
    assert held.value.verdict is ClaimVerdict.DELETED


async def test_a_renewal_never_revives_a_lease_a_peer_took_and_a_hand_off_offers_ours(backend: Backend) -> None:
    leases = backend.leases()
    await leases.claim("ses_A", A)
    await leases.claim("ses_B", A)
    await backend.expire_lease("ses_A")
    await backend.expire_lease("ses_B")
    await leases.claim("ses_B", B)  # expired: the peer takes it
    assert await leases.heartbeat(A, "host-a", 1, 15) == {"ses_A": 1}  # an expired lease nobody took is ours
    assert await leases.adoption_candidates(B) == []  # A lives: its lease is not even read
    rows = await leases.adoption_candidates(B, lambda holder: holder == A)
    assert [(r.session_id, r.lease_owner, r.lease_expired) for r in rows] == [("ses_A", A, False)]
    await leases.hand_off(A)
    rows = await leases.adoption_candidates(B)
    assert [(r.session_id, r.lease_owner, r.lease_expired) for r in rows] == [("ses_A", A, True)]


async def test_adoption_lists_dead_holders_leases_and_free_running_sessions_never_deleted_ones(
    backend: Backend,
) -> None:
    leases, status = backend.leases(), backend.status()
    await leases.claim("ses_mine", A)
    await leases.claim("ses_peer", B, "/d/peer")
    await leases.claim("ses_run", A)
    assert await status.set_status("ses_run", A, "running", None)
    await leases.release("ses_run", 1)  # free, last known running
    await leases.claim("ses_idle", A)
    await leases.release("ses_idle", 1)  # free and idle: nothing to adopt
    await leases.claim("ses_gone", B)
    await leases.mark_deleted("ses_gone")
    assert [r.session_id for r in await leases.adoption_candidates(A)] == ["ses_run"]  # B lives
    asked: list[str] = []
    rows = await leases.adoption_candidates(A, lambda holder: asked.append(holder) or holder == B)
    assert [(r.session_id, r.directory, r.lease_owner, r.lease_expired) for r in rows] == [
        ("ses_peer", "/d/peer", B, False), ("ses_run", None, None, True)]
    assert asked == [B]  # once per live holder of another incarnation, never for ourselves


async def test_each_live_holder_is_judged_once_and_only_dead_holders_sessions_are_listed(backend: Backend) -> None:
    leases = backend.leases()
    for k in range(3):
        await leases.claim(f"ses_a{k}", A)
        await leases.claim(f"ses_b{k}", B)
    await leases.claim("ses_c", "host-c:3:cccc")
    await backend.expire_lease("ses_c")  # expired: listed without asking
    asked: list[str] = []
    rows = await leases.adoption_candidates("host-d:4:dddd", lambda holder: asked.append(holder) or holder == A)
    assert sorted(asked) == [A, B]
    assert [(r.session_id, r.lease_owner, r.lease_expired) for r in rows] == [
        ("ses_a0", A, False), ("ses_a1", A, False), ("ses_a2", A, False), ("ses_c", "host-c:3:cccc", True)]
