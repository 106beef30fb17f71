"""FollowerSupervisor (bridge.sessions.supervisor): the sessions part as one object — its keeper, sweep,
poller and status writer running inside `started()`, hints routed to the session's follower, leases handed
off on the way out. Over the lease store's twin and the driver port's twin; the clock is a variable."""

from __future__ import annotations

from typing import Any, cast

from bridge.config import Settings
from bridge.sessions.supervisor import FollowerSupervisor, SessionHooks
from bridge.store.chat_sessions import LeaseStore
from bridge.store.writes import EventStore
from bridge.upstream.driver_twin import MemoryDriver
from bridge.upstream.port_follower import PortFollower, PortHooks, PortSettings
from tests.support.memory_upstream import MemoryUpstream
from tests.support.waiting import wait_until
from tests.support.warm_registry import ME, Clock, Leases


def supervisor(leases: Leases, driver: MemoryDriver, clock: Clock) -> FollowerSupervisor:
    def follower(sid: str, sink: Any, cursor: int, committed: Any) -> PortFollower:
        return PortFollower(driver, sid, sink, cursor, PortSettings(0.001, 0.01), PortHooks(on_committed=committed))

    return FollowerSupervisor(cast(EventStore, leases), MemoryUpstream().client(), Settings(upstream_name="t"), ME,
                              leases=cast(LeaseStore, leases), clock=clock,
                              hooks=SessionHooks(hostname="host", followers=follower))


async def test_a_warm_session_is_owned_followed_and_its_leases_handed_off_on_the_way_out() -> None:
    leases, clock, driver = Leases(), Clock(), MemoryDriver(2)
    driver.add_session("ses_A")
    sup = supervisor(leases, driver, clock)
    async with sup.started():
        assert sup.running and sup.warm("ses_A", reason="request")
        await wait_until(lambda: isinstance(sup.follower("ses_A"), PortFollower), 5, 0.001, message="followed")
        assert sup.owns("ses_A") and sup.warm_sessions() == ["ses_A"] and sup.status("ses_A") == ("idle", None)
        footprint = sup.footprint()
        assert footprint["warm"] == 1 and footprint["status_machines"] == 1
        assert "known_to_sync" in footprint and "rows" not in footprint
    assert not sup.running and sup.warm_sessions() == []
    row = leases.rows["ses_A"]
    assert row.lease_owner == ME and row.lease_expires_at is not None and row.lease_expires_at <= leases.tables.clock()


async def test_release_stops_following_and_gives_the_lease_back() -> None:
    leases, clock, driver = Leases(), Clock(), MemoryDriver(2)
    driver.add_session("ses_A")
    sup = supervisor(leases, driver, clock)
    async with sup.started():
        sup.warm_for_subscriber("ses_A")
        await wait_until(lambda: sup.owns("ses_A"), 5, 0.001, message="claimed")
        await sup.release("ses_A")
        assert not sup.owns("ses_A") and sup.follower("ses_A") is None and sup.status("ses_A") is None
        assert leases.rows["ses_A"].lease_owner is None


async def test_a_deleted_session_is_tombstoned_and_never_warmed_again() -> None:
    leases, clock, driver = Leases(), Clock(), MemoryDriver(2)
    driver.add_session("ses_A")
    sup = supervisor(leases, driver, clock)
    async with sup.started():
        sup.warm("ses_A", reason="request")
        await wait_until(lambda: sup.owns("ses_A"), 5, 0.001, message="claimed")
        await sup.deleted("ses_A")
        assert leases.rows["ses_A"].deleted and not sup.warm("ses_A", reason="request")
