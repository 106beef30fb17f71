"""The sweep, every `sweep_interval_s`: adopt orphans, release idle sessions (docs/lifecycle.md).

Adoption warms sessions held by incarnations whose lease expired or that are known dead, and free
sessions last known running (bridge.lease.adoption_reason). Idle release stops our following of
a warm session nothing needs (bridge.sessions.gc.release_reason): cursor and history stay, and the
upstream session is never touched.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from bridge import metrics
from bridge.lease import adoption_reason
from bridge.outage import OutageLog
from bridge.sessions.gc import WarmFacts, release_reason
from bridge.sessions.status_machine import Status
from bridge.sessions.warm_table import WarmSession
from bridge.store.codecs import SessionRow


class Orphans(Protocol):
    async def adoption_candidates(self, me: str, holder_dead: Callable[[str], bool]) -> list[SessionRow]: ...


class Warm(Protocol):
    """The part of bridge.sessions.registry.WarmRegistry the sweep needs."""

    def get(self, session_id: str) -> WarmSession | None: ...
    def is_deleted(self, session_id: str) -> bool: ...
    def idle_owned(self, horizon: float) -> list[tuple[str, WarmSession]]: ...  # without a walk (idle_due)
    def subscribers(self, session_id: str) -> int: ...
    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool: ...
    async def release(self, session_id: str, reason: str = "request") -> None: ...


class Activity(Protocol):
    def status(self, session_id: str) -> Status | None: ...
    def is_active(self, session_id: str) -> bool: ...


@dataclass(frozen=True)
class SweepTimes:
    """Whose sweep, after how long a session is idle, how often."""

    owner: str  # our incarnation id
    idle_ttl_s: float
    interval_s: float
    upstream: str = ""


class Sweep:
    def __init__(self, leases: Orphans, registry: Warm, activity: Activity, times: SweepTimes, *,
                 holder_dead: Callable[[str], bool], clock: Callable[[], float],
                 outage: OutageLog | None = None) -> None:
        self._leases = leases
        self._registry = registry
        self._activity = activity
        self._owner = times.owner
        self._holder_dead = holder_dead
        self._idle_ttl_s = times.idle_ttl_s
        self._interval_s = times.interval_s
        self._clock = clock
        self._log = structlog.get_logger("bridge.supervisor").bind(upstream=times.upstream, owner=times.owner)
        self._outage = outage or OutageLog(self._log, "database", clock=clock)

    async def run(self) -> None:
        while True:
            try:
                await self.adopt_orphans()
                await self.release_idle()
            except Exception as e:
                self._outage.failed(f"lease_sweep_failed: {type(e).__name__}: {e}")
            await asyncio.sleep(self._interval_s)

    async def adopt_orphans(self) -> None:
        """The store reads only what may be adopted: a live peer's sessions are not read, its holder is
        judged once (bridge.store.chat_sessions.adoption); each holder's verdict is kept for this sweep."""
        holder_dead = functools.cache(self._holder_dead)
        for c in await self._leases.adoption_candidates(self._owner, holder_dead):
            if self._registry.get(c.session_id) is not None or self._registry.is_deleted(c.session_id):
                continue
            reason = adoption_reason(c.lease_owner, c.lease_expired, holder_dead)
            if reason is not None:
                self._registry.warm(c.session_id, c.directory, reason=reason)

    async def release_idle(self) -> None:
        """Every idle session found is released at once (each one's lease write still waits its turn at
        the database, bridge.sessions.session_run): one at a time, a sweep released ~15 sessions a second,
        less than a serve with 40 new or returning sessions a second warms (BENCHMARKS.md "Churn")."""
        now = self._clock()
        recent = now - self._idle_ttl_s
        idle: list[str] = []
        for sid, w in self._registry.idle_owned(recent):
            if w.last_activity > recent:
                continue  # not idle long enough: never released (gc.release_reason), whatever else holds
            status = self._activity.status(sid)
            if status is None:
                continue  # claimed, status machine not resumed yet
            facts = WarmFacts(now, w.last_activity, status, self._activity.is_active(sid),
                              self._registry.subscribers(sid), behind=w.behind)
            reason = release_reason(facts, self._idle_ttl_s)
            if reason is not None:
                self._log.info("session_idle_release", session_id=sid, why=reason)
                metrics.SESSION_RELEASES.labels(reason="idle").inc()
                idle.append(sid)
        if idle:
            await asyncio.gather(*(self._registry.release(sid, reason="idle") for sid in idle))
