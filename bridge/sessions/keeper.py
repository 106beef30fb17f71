"""Keeps our leases: the heartbeat, the stop of a follower whose lease a peer took, the hand-off.

Every `heartbeat_interval_s` one statement renews our incarnation row and every lease we still hold. A
lease a peer took (new owner, new epoch) is *lost*: its follower is stopped (its writes were fenced
already, by the epoch in write_batch). A lease that merely lapsed and that nobody took is renewed with its
epoch unchanged (bridge.store.chat_sessions.leases.renew_leases). A lease we hold without a follower is given back.
At a clean shutdown `hand_off()` expires our leases at once (owner kept), so peers adopt them at their
next sweep instead of after the TTL.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import structlog

from bridge import metrics
from bridge.outage import OutageLog
from bridge.sessions.warm_table import WarmSession


class Renewals(Protocol):
    """The part of bridge.store.chat_sessions.leases.LeaseStore the keeper needs."""

    async def heartbeat(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> dict[str, int]: ...
    async def hand_off(self, incarnation_id: str) -> None: ...


class Holdings(Protocol):
    """The part of bridge.sessions.registry.WarmRegistry the keeper needs."""

    def get(self, session_id: str) -> WarmSession | None: ...
    def epoch(self, session_id: str) -> int | None: ...
    def lease_lost(self, session_id: str) -> None: ...
    async def release_lease(self, session_id: str, epoch: int) -> None: ...
    # The keeper's two questions, answered without a walk of every warm session (bridge.sessions.lease_index).
    def not_renewed(self, held: Mapping[str, int]) -> list[str]: ...
    def strays(self, held: Mapping[str, int]) -> list[str]: ...


@dataclass(frozen=True)
class Beat:
    """Whose heartbeat, how long a lease lives, how often it is renewed."""

    owner: str  # our incarnation id
    hostname: str
    lease_ttl_s: float
    interval_s: float
    upstream: str = ""


class LeaseKeeper:
    def __init__(self, leases: Renewals, registry: Holdings, beat: Beat, *, clock: Callable[[], float],
                 outage: OutageLog | None = None) -> None:
        self._leases = leases
        self._registry = registry
        self._owner = beat.owner
        self._hostname = beat.hostname
        self._lease_ttl_s = beat.lease_ttl_s
        self._interval_s = beat.interval_s
        self._clock = clock
        self._log = structlog.get_logger("bridge.supervisor").bind(upstream=beat.upstream, owner=beat.owner)
        self._outage = outage or OutageLog(self._log, "database", clock=clock)

    async def run(self) -> None:
        # The first beat registers our incarnation row.
        while True:
            await self.beat()
            await asyncio.sleep(self._interval_s)

    async def beat(self) -> None:
        started = self._clock()
        try:
            held = await self._leases.heartbeat(self._owner, self._hostname, os.getpid(), self._lease_ttl_s)
        except Exception as e:
            self._outage.failed(f"lease_heartbeat_failed: {type(e).__name__}: {e}")
            return
        self._outage.succeeded()
        self._stop_lost(held, started)
        await self._release_strays(held)

    def _stop_lost(self, held: dict[str, int], started: float) -> None:
        """Leases claimed before this heartbeat that it could not renew are gone: stop their followers."""
        for sid in self._registry.not_renewed(held):
            w, epoch = self._registry.get(sid), self._registry.epoch(sid)
            if w is None or epoch is None or w.claimed_at is None or w.claimed_at >= started \
                    or held.get(sid) == epoch:
                continue
            metrics.LEASE_LOSSES.inc()
            self._log.warning("lease_lost", session_id=sid, epoch=epoch, now_held=held.get(sid))
            self._registry.lease_lost(sid)

    async def _release_strays(self, held: dict[str, int]) -> None:
        """A lease we hold without a follower (a claim cancelled right as it committed) would otherwise be
        renewed forever and never adopted: give it back."""
        for sid in self._registry.strays(held):
            epoch = held[sid]
            if self._registry.get(sid) is None:
                self._log.warning("stray_lease_released", session_id=sid, epoch=epoch)
                await self._registry.release_lease(sid, epoch)

    async def hand_off(self) -> None:
        try:
            await self._leases.hand_off(self._owner)
        except Exception as e:  # the leases expire on their own; peers adopt within the TTL
            self._log.warning("lease_hand_off_failed", error=str(e))
        else:
            self._log.info("leases_handed_off")
