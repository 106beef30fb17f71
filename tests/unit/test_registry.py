"""WarmRegistry (bridge.sessions.registry) over the lease store's twin (tests/support/warm_registry.py):
who is warmed and who is not (deleted, parked, refused by a peer, bad ids, not accepting), subscribers,
release and lease loss, and the state it keeps once a session's task ends."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from bridge.sessions.registry import WarmRegistry
from tests.support.metric_values import sample
from tests.support.waiting import wait_until
from tests.support.warm_registry import ME, NOW, Clock, Leases, claimed, warm_registry


async def gone(registry: WarmRegistry, sid: str) -> None:
    await wait_until(lambda: registry.get(sid) is None, 5, 0.001, message=f"{sid} no longer warm")


async def test_a_warm_session_claims_its_lease_and_release_gives_it_back() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, activity):
        await claimed(registry, clock, 1.0, "ses_A")
        assert registry.epoch("ses_A") == 1 and leases.rows["ses_A"].lease_owner == ME
        assert not registry.warm("ses_A", reason="listed")  # already warm: only activity
        await registry.release("ses_A")
        assert registry.get("ses_A") is None and registry.epoch("ses_A") is None
        assert leases.rows["ses_A"].lease_owner is None and activity.status("ses_A") is None
        assert registry.churn() == (1, 0)


async def test_warming_again_counts_as_activity() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        await claimed(registry, clock, 1.0, "ses_A")
        clock.now = 40.0
        registry.warm("ses_A", reason="live_event")
        w = registry.get("ses_A")
        assert w is not None and w.last_activity == 40.0 and w.reason == "request"


async def test_bad_ids_deleted_sessions_and_a_registry_not_accepting_are_never_warmed() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        assert not registry.warm("../ses_A", reason="request")
        await registry.deleted("ses_D")
        assert registry.is_deleted("ses_D") and leases.rows["ses_D"].deleted
        assert not registry.warm("ses_D", reason="request")
        registry.stop_all("handoff")
        assert not registry.accepting and not registry.warm("ses_B", reason="request")
    assert registry.sessions() == []


async def test_a_peer_refusal_cools_down_unless_the_reason_insists() -> None:
    leases, clock = Leases(), Clock()
    leases.put("ses_A", lease_owner="peer:2:b", lease_epoch=4,
               lease_expires_at=leases.tables.clock().replace(year=2027))
    async with warm_registry(leases, clock) as (registry, _):
        assert registry.warm("ses_A", reason="listed")
        await gone(registry, "ses_A")  # held elsewhere: the task ends, the refusal is remembered
        assert registry.footprint()["refused"] == 1
        assert not registry.warm("ses_A", reason="listed")
        assert registry.warm("ses_A", reason="subscriber")  # insistent: asked again at once
        await gone(registry, "ses_A")
        clock.now = 1000.0  # past the cool-down
        registry.forget_expired_refusals()
        assert registry.footprint()["refused"] == 0


async def test_a_parked_session_is_warmed_only_by_an_explicit_wish() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        await claimed(registry, clock, 1.0, "ses_A")
        await registry.release("ses_A")
        registry._table.park("ses_A", "test")  # as a crashing follower leaves it (test_session_run.py)
        assert not registry.warm("ses_A", reason="listed")
        assert registry.warm("ses_A", reason="request") and registry.parked() == {}


async def test_subscribers_warm_their_session_also_when_subscribed_before_accepting() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        registry.set_subscriber_count("ses_A", 2)
        assert registry.subscribers("ses_A") == 2 and registry.get("ses_A") is not None
        await claimed(registry, clock, 0.0, "ses_A")
        registry.set_subscriber_count("ses_A", 0)
        assert registry.subscribers("ses_A") == 0
        registry.stop_all("release")
        await gone(registry, "ses_A")
        registry.set_subscriber_count("ses_B", 1)  # not accepting: remembered only
        assert registry.get("ses_B") is None
        async with asyncio.TaskGroup() as tg:
            registry.attach(tg)
            w = registry.get("ses_B")
            assert w is not None and w.reason == "subscriber"
            await claimed(registry, clock, 0.0, "ses_B")
            registry.stop_all("release")


async def test_a_lost_lease_stops_the_follower_and_leaves_the_peer_lease_alone() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        await claimed(registry, clock, 1.0, "ses_A")
        leases.taken("ses_A")
        registry.lease_lost("ses_A")
        await gone(registry, "ses_A")
        assert leases.rows["ses_A"].lease_owner == "peer:9:x"
        assert not any(j[:2] == ("release", "ses_A") for j in leases.journal)
        assert registry.footprint() == {"warm": 0, "epochs": 0, "idle_index": 1, "early_twins": 0, "refused": 1,
                                        "parked": 0, "deleted": 0, "subscribed": 0}


async def test_live_frames_are_of_no_use_exactly_while_a_live_event_would_not_warm_the_session() -> None:
    """`live_skip_reason` (the live reader drops such a session's frames undecoded) says a reason only when
    the session is not warm here, has no subscriber here, and warming it for a live event does nothing."""
    leases, clock = Leases(), Clock()
    leases.put("ses_P", lease_owner="peer:2:b", lease_epoch=4,
               lease_expires_at=leases.tables.clock().replace(year=2027))
    async with warm_registry(leases, clock) as (registry, _):
        assert registry.live_skip_reason("ses_new") is None  # a live event warms it
        await claimed(registry, clock, 1.0, "ses_A")
        assert registry.live_skip_reason("ses_A") is None  # ours
        assert registry.warm("ses_P", reason="session.next.prompted")
        assert registry.live_skip_reason("ses_P") is None  # being claimed: its twins are kept for its follower
        await gone(registry, "ses_P")  # the peer holds it
        assert registry.live_skip_reason("ses_P") == "held_elsewhere"
        assert not registry.warm("ses_P", reason="message.part.updated")  # what a decoded frame would have done
        registry.set_subscriber_count("ses_P", 1)  # watched here: its deltas are needed
        assert registry.live_skip_reason("ses_P") is None
        await gone(registry, "ses_P")
        registry.set_subscriber_count("ses_P", 0)
        assert registry.live_skip_reason("ses_P") == "held_elsewhere"
        clock.now += 3600.0  # the refusal cooled down: the next live event asks the peer's lease again
        assert registry.live_skip_reason("ses_P") is None
        await registry.deleted("ses_D")
        assert registry.live_skip_reason("ses_D") == "deleted" and not registry.warm("ses_D", reason="message.updated")
        await registry.release("ses_A")
        registry._table.park("ses_A", "test")
        assert registry.live_skip_reason("ses_A") == "parked" and not registry.warm("ses_A", reason="message.updated")
        registry.stop_all("release")
        assert registry.live_skip_reason("ses_D") is None  # not accepting: nothing is skipped on its account


async def test_the_warm_gauge_counts_claimed_sessions_not_those_waiting_to_claim_or_refused() -> None:
    """With workers every worker warms every session at once and all but one wait or are refused: the set's
    `bridge_sessions_warm` (a sum over workers) counts each session once, where it is claimed."""
    leases, clock = Leases(), Clock()
    leases.put("ses_peer", lease_owner="peer:9:x", lease_epoch=1, lease_expires_at=NOW + timedelta(seconds=60))

    def delay(sid: str) -> float:
        return 600.0 if sid == "ses_later" else 0.0  # another worker is its home: this one waits

    async with warm_registry(leases, clock, claim_delay=delay) as (registry, _):
        await claimed(registry, clock, 1.0, "ses_A")
        assert sample("bridge_sessions_warm") == 1
        assert registry.warm("ses_later", reason="listed") and registry.warm("ses_peer", reason="listed")
        await gone(registry, "ses_peer")  # refused: a live peer holds it
        assert registry.get("ses_later") is not None and registry.epoch("ses_later") is None
        assert sample("bridge_sessions_warm") == 1
        await registry.release("ses_A")
        assert sample("bridge_sessions_warm") == 0
