"""LeaseKeeper (heartbeat → lost leases, strays) on the real warm-session registry over the lease store's
in-memory twin (tests/support/warm_registry.py); the clock is a variable."""

from __future__ import annotations

from structlog.testing import capture_logs

from bridge.sessions.keeper import Beat, LeaseKeeper
from bridge.sessions.registry import WarmRegistry
from tests.support.waiting import wait_until
from tests.support.warm_registry import ME, Clock, Leases, claimed, warm_registry


def keeper(leases: Leases, registry: WarmRegistry, clock: Clock) -> LeaseKeeper:
    return LeaseKeeper(leases, registry, Beat(ME, "host", lease_ttl_s=15, interval_s=5), clock=clock)


async def test_a_lease_a_peer_took_stops_its_follower_without_giving_the_lease_back() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        await claimed(registry, clock, 50.0, "ses_taken", "ses_kept")
        await claimed(registry, clock, 100.0, "ses_new")
        leases.taken("ses_taken")
        leases.taken("ses_new")
        leases.late.add("ses_new")  # claimed while the heartbeat ran: its renewal is not judged yet
        await keeper(leases, registry, clock).beat()
        await wait_until(lambda: registry.get("ses_taken") is None, 5, 0.001, message="its follower stopped")
        assert registry.sessions() == ["ses_kept", "ses_new"]
        # stopped as lost: the peer's lease is left alone, and the session is not warmed again at once
        assert not any(j[0] == "release" and j[1] == "ses_taken" for j in leases.journal)
        assert leases.rows["ses_taken"].lease_owner == "peer:9:x"
        assert not registry.warm("ses_taken", reason="listed") and registry.get("ses_taken") is None


async def test_a_lease_we_hold_without_a_follower_is_given_back() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        await claimed(registry, clock, 50.0, "ses_A")
        epoch = registry.epoch("ses_A")
        leases.ours("ses_stray", 9)
        await keeper(leases, registry, clock).beat()
        assert ("release", "ses_stray", 9) in leases.journal and leases.rows["ses_stray"].lease_owner is None
        assert registry.sessions() == ["ses_A"] and leases.rows["ses_A"].lease_owner == ME
        assert registry.epoch("ses_A") == epoch


async def test_a_failed_heartbeat_stops_nothing() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        await claimed(registry, clock, 50.0, "ses_A")
        leases.taken("ses_A")
        leases.failing = True
        with capture_logs() as logs:
            await keeper(leases, registry, clock).beat()
        # Logged as the database lost (once, not per beat: bridge.outage), with what failed.
        assert registry.sessions() == ["ses_A"]
        assert [e["event"] for e in logs] == ["dependency_lost"] and "lease_heartbeat_failed" in logs[0]["error"]


async def test_hand_off_expires_our_leases_at_once_and_keeps_them_ours() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        await claimed(registry, clock, 50.0, "ses_A")
        await keeper(leases, registry, clock).hand_off()
        row = leases.rows["ses_A"]
        assert row.lease_owner == ME and row.lease_expires_at is not None
        assert row.lease_expires_at <= leases.tables.clock()
