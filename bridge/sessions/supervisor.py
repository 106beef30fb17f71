"""The warm sessions of one upstream, as one part with a small interface, built from parts with one job:

- `registry.WarmRegistry`: the warm sessions, one follower task each (claim → follow → stop), parking;
- `keeper.LeaseKeeper`: heartbeat, lost-lease stop, stray release, hand-off at shutdown;
- `sweep.Sweep`: orphan adoption and idle release;
- `activity.ActivityTracker`: the status machines and the status/gap writes, in order;
- `poller.ActivePoller`: `GET /api/session/active` → the status machines, warming active sessions.

`release()` only stops *our* following of a session (cursor and history stay, the upstream turn is
untouched). Stopping an upstream turn is `interrupt()`, which nothing in the bridge calls on its own.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog

from bridge import metrics
from bridge.config import Settings
from bridge.events import Envelope
from bridge.events.legacy_shapes import SessionStatus
from bridge.lease import HolderProbe
from bridge.outage import OutageLog
from bridge.perf.turnstile import Turnstile
from bridge.sessions.activity import ActivityTracker
from bridge.sessions.keeper import Beat, LeaseKeeper
from bridge.sessions.parking import FailureStreak
from bridge.sessions.poller import ActivePoller
from bridge.sessions.registry import WarmRegistry
from bridge.sessions.session_run import FollowerFactory, RunnerParts
from bridge.sessions.sweep import Sweep, SweepTimes
from bridge.store.chat_sessions import LeaseStore
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.port_follower import PortFollower

FOOTPRINT_EVERY_S = 15.0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class SessionHooks:
    """What the sessions part is built with besides its store, client, settings and owner: how holders
    are probed, how a crash streak parks, the process's turnstile, and the followers of another upstream
    generation (docs/upstream.md §24; None: the 1.x follower)."""

    pid_alive: Callable[[int], bool] = _pid_alive
    hostname: str | None = None
    failure_streak: Callable[[], FailureStreak] = FailureStreak
    turnstile: Turnstile | None = None
    followers: FollowerFactory | None = None
    on_idle: Callable[[str], None] | None = None  # a session of ours went idle upstream (the legacy queue)
    claim_delay: Callable[[str], float] | None = None  # one of a host's workers (bridge.lease.claim_delay)


class FollowerSupervisor:
    def __init__(self, store: EventStore, client: UpstreamClient, settings: Settings, owner: str, *,
                 leases: LeaseStore | None = None, clock: Callable[[], float] = time.monotonic,
                 hooks: SessionHooks = SessionHooks()) -> None:
        s = settings
        self.owner = owner
        self._client = client
        self._store = store
        leases = leases or LeaseStore(store.engine, store.upstream)
        host = hooks.hostname or socket.gethostname()
        holder_dead = HolderProbe(s.lease_pid_probe, host, hooks.pid_alive)
        self.activity = ActivityTracker(leases, owner, s.stall_timeout_s, clock=clock, upstream=s.upstream_name,
                                        on_idle=hooks.on_idle)
        self.registry = WarmRegistry(RunnerParts(store, leases, client, self.activity, holder_dead, clock,
                                                 hooks.turnstile or Turnstile(), hooks.followers,
                                                 hooks.claim_delay),
                                     s, owner, hooks.failure_streak)
        # Heartbeats and sweeps fail together while the database is away: logged once, not every beat.
        self.database_outage = OutageLog(structlog.get_logger("bridge.supervisor").bind(
            upstream=s.upstream_name, owner=owner), "database", clock=clock)
        self._keeper = LeaseKeeper(leases, self.registry, Beat(owner, host, s.lease_ttl_s, s.heartbeat_interval_s,
                                                               s.upstream_name),
                                   clock=clock, outage=self.database_outage)
        self._sweep = Sweep(leases, self.registry, self.activity,
                            SweepTimes(owner, s.idle_ttl_s, s.sweep_interval_s, s.upstream_name),
                            holder_dead=holder_dead, clock=clock)  # its own outage log: it uses the main pool
        self._poller = ActivePoller(client, self.activity, self.registry, poll_s=s.active_poll_s,
                                    idle_poll_s=s.active_poll_idle_s, clock=clock)
        self._stop = asyncio.Event()

    # -- queries ----------------------------------------------------------------------------------
    def warm_sessions(self) -> list[str]:
        return self.registry.sessions()

    def owns(self, session_id: str) -> bool:
        return self.registry.epoch(session_id) is not None

    def follower(self, session_id: str) -> DurableFollower | PortFollower | None:
        w = self.registry.get(session_id)
        return None if w is None else w.follower

    def status(self, session_id: str) -> tuple[str, str | None] | None:
        """The status this process derived for a warm session it owns (None otherwise)."""
        st = self.activity.status(session_id) if self.owns(session_id) else None
        return None if st is None else (st.value, self.activity.reason(session_id))

    def parked(self) -> dict[str, str]:
        return self.registry.parked()

    def footprint(self) -> dict[str, int]:
        """Sessions held by every per-session structure of this part, and the sessions the client names in
        sync-log bodies (bounded: bridge.upstream.known_sizes.MAX_KNOWN_AGGREGATES)."""
        return {**self.registry.footprint(), **self.activity.footprint(),
                "known_to_sync": self._client.known_sessions()}

    async def _report_footprint(self) -> None:
        """Every `FOOTPRINT_EVERY_S`: expired refusals dropped, `bridge_session_structures{what}` set."""
        while True:
            await asyncio.sleep(FOOTPRINT_EVERY_S)
            self.registry.forget_expired_refusals()
            for what, n in self.footprint().items():
                metrics.SESSION_STRUCTURES.labels(what=what).set(n)

    @property
    def running(self) -> bool:
        return self.registry.accepting

    # -- commands (hints from the live stream, the fan-out, requests) ------------------------------
    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        return self.registry.warm(session_id, directory, reason)

    def warm_for_subscriber(self, session_id: str) -> bool:
        return self.registry.warm(session_id, reason="subscriber")

    def set_subscriber_count(self, session_id: str, count: int) -> None:
        self.registry.set_subscriber_count(session_id, count)

    def live_skip_reason(self, session_id: str) -> str | None:
        return self.registry.live_skip_reason(session_id)

    def notify_seen(self, session_id: str, seq: int) -> None:
        w = self.registry.get(session_id)
        if w is not None:
            w.seen(seq)

    def twin(self, session_id: str, env: Envelope) -> None:
        """An exact sync twin of `/global/event`: the session's follower stores it when it is next in line
        (a session still being claimed keeps it for its follower: bridge.upstream.early_twins)."""
        w = self.registry.get(session_id)
        if w is not None:
            w.twin(env)

    def repair_all(self, cause: str) -> None:
        """Every warm session reads its sync log from its cursor (after a `/global/event` reconnect); one
        still being claimed reads it when it starts (what it kept of the last connection no longer covers)."""
        for sid in self.registry.sessions():
            w = self.registry.get(sid)
            if w is not None:
                w.live_lost(cause)

    def database_back(self) -> None:
        """The database connection came back (restart, failover): every warm session checks its stored
        cursor and re-reads from the sync log what the database lost (docs/scaling.md "Failover")."""
        for sid in self.registry.sessions():
            f = self.follower(sid)
            if f is not None:
                f.database_back()

    def upstream_status(self, session_id: str, status: SessionStatus) -> None:
        self.activity.upstream_status(session_id, status)

    async def deleted(self, session_id: str) -> None:
        await self.registry.deleted(session_id)

    async def release(self, session_id: str, reason: str = "request") -> None:
        await self.registry.release(session_id, reason)

    async def interrupt(self, session_id: str) -> None:
        """Stop the upstream turn (`POST /api/session/{id}/interrupt`). Only on an explicit request."""
        await self._client.interrupt(session_id)

    # -- lifetime -----------------------------------------------------------------------------------
    @asynccontextmanager
    async def started(self) -> AsyncIterator[FollowerSupervisor]:
        """Running inside the block (warm() is accepted from its first line); on the way out every
        follower stops and the leases are handed off to peers."""
        await self.registry.load_known()
        try:
            async with asyncio.TaskGroup() as tg:
                self.registry.attach(tg)
                loops = [
                    tg.create_task(self._keeper.run(), name="lease-heartbeat"),
                    tg.create_task(self._sweep.run(), name="lease-sweep"),
                    tg.create_task(self._poller.run(), name="active-poller"),
                    tg.create_task(self.activity.run(), name="status-writer"),
                    tg.create_task(self._report_footprint(), name="footprint"),
                ]
                try:
                    yield self
                finally:
                    for t in loops:
                        t.cancel()
                    self.registry.stop_all("handoff")
        finally:
            await self._keeper.hand_off()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """`started()` until `stop()`."""
        async with self.started():
            await self._stop.wait()
