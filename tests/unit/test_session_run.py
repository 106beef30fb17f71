"""SessionRunner (bridge.sessions.session_run): one warm session's claim → follow → stop, driven through the
real registry over the lease store's twin and the driver port's twin (tests/support/warm_registry.py):
how each way a follower ends leaves the session (released, deleted, parked), and a crash streak parks it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from bridge.errors import InvalidRequest
from bridge.lease import claim_delay, home_worker
from bridge.sessions.parking import FailureStreak
from bridge.sessions.registry import WarmRegistry
from bridge.upstream.driver import LogRead
from bridge.upstream.driver_twin import MemoryDriver
from tests.support.waiting import wait_until
from tests.support.warm_registry import ME, Clock, Leases, warm_registry


class Refusing(MemoryDriver):
    """A serve that refuses every read of a log with `error`."""

    def __init__(self, error: Exception) -> None:
        super().__init__(2)
        self.error = error
        self.reads = 0

    @asynccontextmanager
    async def follow(self, session_id: str, after: int) -> AsyncIterator[AsyncIterator[LogRead]]:
        self.reads += 1
        raise self.error
        yield  # type: ignore[unreachable]


async def ended(registry: WarmRegistry, sid: str) -> None:
    await wait_until(lambda: registry.get(sid) is None, 5, 0.001, message=f"{sid}'s task ended")


async def test_a_session_the_serve_does_not_know_with_nothing_stored_is_released_not_deleted() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock, driver=MemoryDriver(2)) as (registry, _):
        registry.warm("ses_A", reason="live_event")
        await ended(registry, "ses_A")
        assert not registry.is_deleted("ses_A") and not leases.rows["ses_A"].deleted
        assert ("release", "ses_A", 1) in leases.journal and leases.rows["ses_A"].lease_owner is None
        assert registry.warm("ses_A", reason="live_event")  # a session created later under this id is mirrored


async def test_a_session_gone_upstream_after_something_was_stored_is_recorded_deleted() -> None:
    leases, clock = Leases(), Clock()
    leases.put("ses_A", cursor_seq=5)
    async with warm_registry(leases, clock, driver=MemoryDriver(2)) as (registry, activity):
        registry.warm("ses_A", reason="request")
        await ended(registry, "ses_A")
        assert registry.is_deleted("ses_A") and leases.rows["ses_A"].deleted
        assert activity.status("ses_A") is None and not registry.warm("ses_A", reason="request")


async def test_a_claim_refused_because_the_session_is_deleted_marks_it_deleted() -> None:
    leases, clock = Leases(), Clock()
    leases.put("ses_A", deleted=True)
    async with warm_registry(leases, clock) as (registry, _):
        registry.warm("ses_A", reason="request")
        await ended(registry, "ses_A")
        assert registry.is_deleted("ses_A") and registry.epoch("ses_A") is None


async def test_a_cursor_the_serve_refuses_parks_the_session() -> None:
    leases, clock = Leases(), Clock()
    leases.put("ses_A", cursor_seq=3)
    driver = Refusing(InvalidRequest("bad cursor", 400, "BadRequest"))
    async with warm_registry(leases, clock, driver=driver) as (registry, _):
        registry.warm("ses_A", reason="request")
        await ended(registry, "ses_A")
        assert registry.parked() == {"ses_A": "follower stopped: bad_cursor at cursor 3"}
        assert leases.rows["ses_A"].status == "parked" and leases.rows["ses_A"].lease_owner is None
        assert not registry.warm("ses_A", reason="live_event") and driver.reads == 1


async def test_a_follower_that_keeps_crashing_is_parked() -> None:
    leases, clock = Leases(), Clock()
    driver = Refusing(RuntimeError("boom"))
    async with warm_registry(leases, clock, driver=driver, failures=lambda: FailureStreak(3, 60.0)) as (registry, _):
        registry.warm("ses_A", reason="request")
        await ended(registry, "ses_A")
        assert driver.reads == 3 and list(registry.parked()) == ["ses_A"]
        assert "RuntimeError" in registry.parked()["ses_A"] and leases.rows["ses_A"].status == "parked"
        assert leases.rows["ses_A"].lease_owner is None and registry.epoch("ses_A") is None


async def test_a_release_while_following_gives_the_lease_back_and_a_hand_off_keeps_it() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock) as (registry, _):
        for sid in ("ses_A", "ses_B"):
            registry.warm(sid, reason="request")
        await wait_until(lambda: all((w := registry.get(s)) is not None and w.follower is not None
                                     for s in ("ses_A", "ses_B")), 5, 0.001, message="followed")
        await registry.release("ses_A")
        assert leases.rows["ses_A"].lease_owner is None
        registry.stop_all("handoff")
        await ended(registry, "ses_B")
        assert leases.rows["ses_B"].lease_owner == ME  # kept for a peer to adopt (the keeper hands it off)


# --- a host's workers: each session claimed by its home worker (bridge.lease.claim_delay) -----------------

WORKERS = ("host:1:w0", "host:2:w1")
SIDS = [f"ses_W{i:02d}" for i in range(24)]


def delays(index: int) -> Callable[[str], float]:
    return lambda sid: claim_delay(sid, index, len(WORKERS), 0.05)


async def test_two_workers_seeing_every_session_each_claim_their_home_sessions_only() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock, owner=WORKERS[0], claim_delay=delays(0)) as (w0, _), \
            warm_registry(leases, clock, owner=WORKERS[1], claim_delay=delays(1)) as (w1, _):
        for sid in SIDS:  # both see every session (the parent's one /global/event)
            w0.warm(sid, reason="session.created")
            w1.warm(sid, reason="session.created")
        home = {sid: (w0, w1)[home_worker(sid, 2)] for sid in SIDS}

        def settled() -> bool:  # each followed by its home worker, the other one refused and gone
            return all((h := home[sid].get(sid)) is not None and h.follower is not None
                       and (w1 if home[sid] is w0 else w0).get(sid) is None for sid in SIDS)

        await wait_until(settled, 5, 0.005, message="every session followed by its home worker only")
        assert {sid: leases.rows[sid].lease_owner for sid in SIDS} == {
            sid: WORKERS[home_worker(sid, 2)] for sid in SIDS}
        assert 0 < sum(home_worker(sid, 2) for sid in SIDS) < len(SIDS)  # both workers hold some


async def test_a_session_whose_home_worker_is_away_is_claimed_by_another_after_the_delay() -> None:
    leases, clock = Leases(), Clock()
    async with warm_registry(leases, clock, owner=WORKERS[1], claim_delay=delays(1)) as (w1, _):
        for sid in SIDS:
            w1.warm(sid, reason="session.created")
        await wait_until(lambda: all((w := w1.get(sid)) is not None and w.follower is not None for sid in SIDS),
                         5, 0.005, message="every session followed by the one worker up")
        assert {leases.rows[sid].lease_owner for sid in SIDS} == {WORKERS[1]}
