"""A real warm-session registry (bridge.sessions.registry, its runner and its table) over the lease store's
in-memory twin (bridge.store.memory) and the driver port's in-memory twin
(bridge.upstream.driver_twin): warming a session claims a real lease in the twin, and its follower is a
real `PortFollower` reading the session's (empty) log until it is stopped. The clock is a variable. The
keeper's and the sweep's unit tests run on it (tests/unit/test_keeper.py, tests/unit/test_sweep.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from bridge.config import Settings
from bridge.perf.turnstile import Turnstile
from bridge.sessions.activity import ActivityTracker
from bridge.sessions.parking import FailureStreak
from bridge.sessions.registry import WarmRegistry
from bridge.sessions.session_run import RunnerParts
from bridge.store.chat_sessions import LeaseStore
from bridge.store.codecs import SessionRow
from bridge.store.memory import MemoryLeaseStore
from bridge.store.writes import EventStore
from bridge.upstream.driver_twin import MemoryDriver
from bridge.upstream.port_follower import PortFollower, PortHooks, PortSettings
from tests.support.memory_upstream import MemoryUpstream
from tests.support.waiting import wait_until

ME = "host:1:me"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Leases(MemoryLeaseStore):
    """The lease store's twin; `failing`: the database is away for the heartbeat; `late`: sessions claimed
    after the heartbeat's statement ran (not in its answer); `resuming`: running sessions whose stored turn
    is not read yet (their claim's status machine waits for `resumed`)."""

    def __init__(self) -> None:
        super().__init__(clock=lambda: NOW)
        self.failing = False
        self.late: set[str] = set()
        self.resuming: set[str] = set()
        self.resumed = asyncio.Event()

    def ours(self, session_id: str, epoch: int) -> None:
        """A lease of ours in the database (from a claim this process no longer follows)."""
        self.put(session_id, lease_owner=ME, lease_epoch=epoch, lease_expires_at=NOW + timedelta(seconds=5))

    def taken(self, session_id: str, owner: str = "peer:9:x") -> None:
        """A peer took the lease (new owner, new epoch)."""
        row = self.rows[session_id]
        self.put(session_id, lease_owner=owner, lease_epoch=row.lease_epoch + 1)

    async def heartbeat(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> dict[str, int]:
        if self.failing:
            raise ConnectionError("database away (test)")
        held = await super().heartbeat(incarnation_id, hostname, pid, ttl_s)
        return {sid: e for sid, e in held.items() if sid not in self.late}

    async def sessions(self, include_deleted: bool = False) -> list[SessionRow]:
        """EventStore's listing, as the registry reads it at start (deleted and parked sessions)."""
        return [SessionRow(r.session_id, cursor_seq=r.cursor_seq, status=r.status, status_reason=r.status_reason,
                           deleted=r.deleted) for r in sorted(self.rows.values(), key=lambda r: r.session_id)
                if include_deleted or not r.deleted]

    async def turn_state(self, session_id: str, limit: int = 200) -> Any:
        if session_id in self.resuming:
            await self.resumed.wait()
        return await super().turn_state(session_id, limit)


@asynccontextmanager
async def warm_registry(leases: Leases, clock: Clock, *, dead: Callable[[str], bool] = lambda owner: False,
                        settings: Settings | None = None, driver: MemoryDriver | None = None,
                        failures: Callable[[], FailureStreak] = FailureStreak, owner: str = ME,
                        claim_delay: Callable[[str], float] | None = None,
                        ) -> AsyncIterator[tuple[WarmRegistry, ActivityTracker]]:
    """The registry accepting sessions (in a task group) until the block ends; then every follower stops.
    Without a `driver` every warmed session exists upstream with an empty log; with one, as it says."""
    serve = driver or MemoryDriver(2)
    activity = ActivityTracker(leases, owner, 3600.0, clock=clock)  # a turn stalls after an hour

    def follower(sid: str, sink: Any, cursor: int, committed: Any) -> PortFollower:
        if driver is None:
            serve.add_session(sid)
        return PortFollower(serve, sid, sink, cursor, PortSettings(0.001, 0.01), PortHooks(on_committed=committed))

    parts = RunnerParts(cast(EventStore, leases), cast(LeaseStore, leases), MemoryUpstream().client(), activity,
                        dead, clock, Turnstile(), follower, claim_delay)
    registry = WarmRegistry(parts, settings or Settings(reconnect_min_s=0.001, reconnect_max_s=0.01), owner,
                            failures)
    async with asyncio.TaskGroup() as tg:
        registry.attach(tg)
        try:
            yield registry, activity
        finally:
            registry.stop_all("release")


async def claimed(registry: WarmRegistry, clock: Clock, at: float, *session_ids: str) -> None:
    """Warm the sessions at clock `at` and wait until each is claimed and followed."""
    clock.now = at
    for sid in session_ids:
        registry.warm(sid, reason="request")

    def followed() -> bool:
        return all((w := registry.get(s)) is not None and w.follower is not None for s in session_ids)

    await wait_until(followed, 5, 0.001, message=f"{session_ids} claimed and followed")
