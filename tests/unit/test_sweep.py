"""Sweep (adoption, idle release) on the real warm-session registry and activity tracker over the lease
store's in-memory twin (tests/support/warm_registry.py); the clock is a variable."""

from __future__ import annotations

from datetime import timedelta

from bridge.sessions.activity import ActivityTracker
from bridge.sessions.registry import WarmRegistry
from bridge.sessions.sweep import Sweep, SweepTimes
from tests.support.waiting import wait_until
from tests.support.warm_registry import ME, NOW, Clock, Leases, claimed, warm_registry

DEAD = "host:2:b"


def dead(owner: str) -> bool:
    return owner == DEAD


def sweep(leases: Leases, registry: WarmRegistry, activity: ActivityTracker, clock: Clock) -> Sweep:
    return Sweep(leases, registry, activity, SweepTimes(ME, idle_ttl_s=600, interval_s=5), holder_dead=dead,
                 clock=clock)


def candidate(leases: Leases, session_id: str, owner: str | None, expired: bool) -> None:
    if owner is None:
        leases.put(session_id, status="running")  # last known running, nobody follows it
    else:
        leases.put(session_id, lease_owner=owner, lease_epoch=1,
                   lease_expires_at=NOW + timedelta(seconds=-1 if expired else 5))


async def test_orphans_and_dead_holders_are_adopted_and_live_peers_deleted_or_warm_sessions_are_not() -> None:
    leases, clock = Leases(), Clock()
    for sid, owner, expired in [("ses_expired", "peer:1:a", True), ("ses_dead", DEAD, False),
                                ("ses_live", "peer:3:c", False), ("ses_running", None, False),
                                ("ses_deleted", "peer:1:a", True)]:
        candidate(leases, sid, owner, expired)
    async with warm_registry(leases, clock, dead=dead) as (registry, activity):
        await claimed(registry, clock, 0.0, "ses_warm")
        await registry.deleted("ses_deleted")
        await sweep(leases, registry, activity, clock).adopt_orphans()
        reasons = {sid: w.reason for sid in registry.sessions() if (w := registry.get(sid)) is not None}
        assert reasons == {"ses_dead": "orphan_holder_dead", "ses_expired": "orphan", "ses_running": "last_running",
                           "ses_warm": "request"}
        await wait_until(lambda: all(registry.epoch(s) is not None for s in reasons), 5, 0.001, message="claimed")
        assert {s: leases.rows[s].lease_owner for s in reasons} == dict.fromkeys(reasons, ME)
        assert leases.rows["ses_live"].lease_owner == "peer:3:c"


async def test_only_idle_unsubscribed_inactive_sessions_are_released() -> None:
    leases, clock = Leases(), Clock()
    leases.put("ses_running", status="running")
    leases.put("ses_resuming", status="running")
    leases.resuming.add("ses_resuming")
    async with warm_registry(leases, clock) as (registry, activity):
        # listed active before the others are claimed (a listing without them would end their turns)
        activity.observe_active(["ses_active"], 0.0)
        await claimed(registry, clock, 0.0, "ses_idle", "ses_subscribed", "ses_running", "ses_active")
        registry.warm("ses_resuming", reason="request")  # claimed, its status machine not resumed yet
        await wait_until(lambda: registry.epoch("ses_resuming") is not None, 5, 0.001, message="claimed")
        await claimed(registry, clock, 900.0, "ses_recent")
        registry.set_subscriber_count("ses_subscribed", 1)
        clock.now = 1000.0  # idle TTL 600: everything warmed at 0 is old enough
        await sweep(leases, registry, activity, clock).release_idle()
        assert registry.get("ses_idle") is None and ("release", "ses_idle", 1) in leases.journal
        assert registry.sessions() == ["ses_active", "ses_recent", "ses_resuming", "ses_running", "ses_subscribed"]
        leases.resumed.set()
