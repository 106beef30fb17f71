"""One warm session's task: claim the lease → resume its status machine → follow the durable stream → stop:
give the lease back (release), keep it for a peer (hand-off, lease lost), record the deletion, or park the
session. A crash restarts it after a backoff; one that keeps crashing parks the session
(bridge.sessions.parking). `WarmRegistry` (bridge.sessions.registry) starts one per warm session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.backoff import Backoff
from bridge.config import Settings
from bridge.errors import LeaseHeld
from bridge.events import ChatEvent
from bridge.events.legacy_state import SEED_KINDS
from bridge.lease import refusal_s
from bridge.perf.turnstile import Turnstile
from bridge.sessions.activity import ActivityTracker
from bridge.sessions.claim_batch import ClaimBatcher
from bridge.sessions.parking import is_transient
from bridge.sessions.status_machine import Status
from bridge.sessions.warm_table import WarmSession, WarmTable
from bridge.store.chat_sessions import Claim, TurnState
from bridge.store.ports import SessionStatusPort
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from bridge.upstream.follower_settings import FollowerHooks, FollowerSettings
from bridge.upstream.port_follower import PortFollower
from bridge.upstream.stall_policy import StallGovernor
from bridge.upstream.store_sink import StoreSink

T = TypeVar("T")

# A session's own database work outside the group committer (a batch of claims, a running turn's tail, legacy
# seed, stored cursor, release) runs at most this many at once for the whole process, below the write pool (5 + 10
# overflow; the rest for the group commits, heartbeat, sweep, status writer, commands): 10,000 sessions
# warming at once queue here, in order, instead of failing on the pool's acquire timeout (docs/lifecycle.md
# "Warm-up"). 8 made a warm-up of 200 sessions 2.5x slower than unbounded here; 10 to 12 as fast.
SESSION_DB_AT_ONCE = 10

# A claimed session's catch-up waits at most this long for the other sessions' claims to be taken
# (bridge.sessions.claim_batch `settled`; 10,000 claims take ~2 s alone on the 2-core machine).
CLAIMS_FIRST_MAX_S = 10.0

# Triggers that try a claim even when a peer refused it moments ago.
INSISTENT = frozenset({"request", "subscriber", "orphan", "orphan_holder_dead", "last_running"})
_CLAIM_LABELS = INSISTENT | {"active", "listed", "known", "new_events", "gone_upstream"}


def _claim_label(reason: str) -> str:
    return reason if reason in _CLAIM_LABELS else "live_event"  # bounded label values


# (session id, sink, stored cursor, on_committed) → the session's follower (bridge.upstream.port_follower).
FollowerFactory = Callable[[str, StoreSink, int, Callable[[Sequence[ChatEvent]], None]], PortFollower]

@dataclass(frozen=True)
class RunnerParts:
    """What the runner of a process's warm sessions works with (bridge.sessions.registry builds it)."""

    store: EventStore
    leases: SessionStatusPort
    client: UpstreamClient
    activity: ActivityTracker
    holder_dead: Callable[[str], bool]
    clock: Callable[[], float]
    turnstile: Turnstile  # one for every follower of the process (bridge.perf.turnstile)
    # Followers of another upstream generation (bridge.upstream.driver): None = the 1.x follower.
    follower_factory: FollowerFactory | None = None
    # One of a host's workers: how long to wait before claiming a session (bridge.lease.claim_delay).
    claim_delay: Callable[[str], float] | None = None


class SessionRunner:
    """Runs the task of each warm session; what it learns (epoch, activity, follower, marks) it tells the
    sessions' one owner, the `WarmTable` (bridge.sessions.warm_table)."""

    def __init__(self, parts: RunnerParts, table: WarmTable, settings: Settings, owner: str,
                 log: FilteringBoundLogger) -> None:
        self._store = parts.store
        self._leases = parts.leases
        self._client = parts.client
        self._activity = parts.activity
        self._settings = settings
        self._owner = owner
        self._table = table
        self._log = log
        self._clock = parts.clock
        self._turnstile = parts.turnstile
        self._follower_factory = parts.follower_factory
        self._claim_delay = parts.claim_delay
        self._db_gate = asyncio.Semaphore(SESSION_DB_AT_ONCE)
        # One stall governor for every follower: whether a late stream is stuck or the process is slow.
        self._stall_governor = StallGovernor(settings.durable_stall_s)
        # Every warm session's claim, batched: one transaction (and one gate place) for many sessions.
        store, dead = parts.store, parts.holder_dead
        self._claims = ClaimBatcher(lambda asks: self._gated(lambda: store.claim_many(
            asks, owner, lease_ttl_s=settings.lease_ttl_s, holder_dead=dead)))

    async def _gated(self, work: Callable[[], Awaitable[T]]) -> T:
        """One piece of a session's database work, within `SESSION_DB_AT_ONCE`."""
        metrics.SESSION_DB_WAITING.inc()
        try:
            await self._db_gate.acquire()
        finally:
            metrics.SESSION_DB_WAITING.dec()
        try:
            return await work()
        finally:
            self._db_gate.release()

    def cool_down(self, session_id: str, holder: str | None = None) -> None:
        """A peer writes the session now: leave it alone for one sweep interval (longer for another worker of
        this host: bridge.lease.refusal_s)."""
        seconds = refusal_s(self._owner, holder, self._settings.sweep_interval_s, self._claim_delay is not None)
        self._table.refuse(session_id, self._clock() + seconds)

    async def release_lease(self, session_id: str, epoch: int) -> None:
        try:
            await self._gated(lambda: self._store.release(session_id, epoch))
        except Exception as e:  # the lease expires on its own; never mask the original exit
            self._log.warning("lease_release_failed", session_id=session_id, error=str(e))

    async def run(self, session_id: str, directory: str | None, w: WarmSession) -> None:
        log = self._log.bind(session_id=session_id)
        backoff = Backoff(self._settings.reconnect_min_s, self._settings.reconnect_max_s)
        delay = 0.0 if self._claim_delay is None else self._claim_delay(session_id)
        if delay > 0:  # another worker of this host is its home: it claims first (bridge.lease.claim_delay)
            await asyncio.sleep(delay)
        while True:
            try:
                outcome, cursor = await self._follow_once(session_id, directory, w)
                if outcome is FollowerExit.LEASE_LOST:
                    # A write was fenced. A live peer that holds the lease now refuses the claim below
                    # (LeaseHeld: we stop); a lease nobody holds any more (ours expired under load, or
                    # released as a stray) is claimed again and its follower catches up from the stored
                    # cursor, instead of leaving what it had not stored until the session's next event.
                    await asyncio.sleep(backoff.next_delay())
                    continue
                await self._stopped(session_id, w, outcome, cursor)
            except LeaseHeld as e:
                self.cool_down(session_id, e.holder)
                log.debug("session_held_elsewhere", verdict=e.verdict.value, holder=e.holder)
                if e.verdict.value == "deleted":
                    self._table.mark_deleted(session_id)
                return
            except asyncio.CancelledError:
                epoch = self._table.epoch(session_id)
                if epoch is not None and w.stop_mode == "release":
                    await self.release_lease(session_id, epoch)
                raise
            except Exception as e:
                if await self._crashed(session_id, w, e):
                    return
                await asyncio.sleep(backoff.next_delay())
                continue
            log.info("follower_stopped", outcome=outcome.value)
            return

    async def _follow_once(self, session_id: str, directory: str | None, w: WarmSession) -> tuple[FollowerExit, int]:
        s = self._settings
        self._table.hold(session_id, None)
        claim = await self._claims.claim(session_id, directory)
        self._table.hold(session_id, claim.epoch, self._clock())
        metrics.SESSIONS_WARM.set(self._table.claimed())
        await self._activity.resume(session_id, claim.cursor_seq, await self._turn_state(session_id, claim))
        epoch, cursor = claim.epoch, claim.cursor_seq
        self._log.info("lease_claimed", session_id=session_id, epoch=epoch, cursor_seq=cursor)
        metrics.LEASE_CLAIMS.labels(reason=_claim_label(w.reason)).inc()
        await self._claims.settled(CLAIMS_FIRST_MAX_S)  # a warm-up: every claim first (claim_batch)
        sink = StoreSink(self._store, session_id, epoch, cursor)
        committed = self._on_committed(session_id, w)
        factory = self._follower_factory
        if factory is not None:  # a 2.x log follower reads from its cursor: no early twins
            follower = self._table.follow_with(w, lambda _early: factory(session_id, sink, cursor, committed))
        else:
            hooks = FollowerHooks(on_committed=committed, seed=self._seed(session_id, cursor),
                                  stored_cursor=lambda: self._gated(sink.stored_cursor), turnstile=self._turnstile,
                                  stall_governor=self._stall_governor)
            follower = self._table.follow_with(w, lambda early: DurableFollower(
                session_id, self._client, sink, cursor, FollowerSettings.of(s), hooks, early))
        return await follower.run(), follower.cursor

    async def _turn_state(self, session_id: str, claim: Claim) -> TurnState:
        """Where the status machine resumes: the claim returned the stored status; only an open turn needs
        its stored tail (one read), every other status continues from the status alone."""
        if claim.status == Status.RUNNING.value:
            return await self._gated(lambda: self._leases.turn_state(session_id))
        return TurnState(claim.status, claim.status_reason, [])

    def _seed(self, session_id: str, claimed_cursor: int) -> Callable[[], Awaitable[list[dict[str, Any]]]]:
        """The stored rows the legacy turn state starts from. At a claimed cursor of 0 or less nothing but
        seq 0 (`session.created`, not a seed kind) can be stored: the first seed reads nothing. A later one
        (after a rewind) always reads."""
        nothing_stored = [claimed_cursor <= 0]

        async def seed() -> list[dict[str, Any]]:
            if nothing_stored[0]:
                nothing_stored[0] = False
                return []
            return await self._gated(lambda: self._store.seed_rows(session_id, sorted(SEED_KINDS)))

        return seed

    def _on_committed(self, session_id: str, w: WarmSession) -> Callable[[Sequence[ChatEvent]], None]:
        def committed(events: Sequence[ChatEvent]) -> None:
            self._table.committed(w, self._clock())
            self._activity.committed(session_id, events)

        return committed

    async def _crashed(self, session_id: str, w: WarmSession, error: Exception) -> bool:
        """A crash in one session never stops the others: True when it is parked now, else retry."""
        metrics.FOLLOWER_CRASHES.inc()
        self._log.error("follower_crashed", session_id=session_id, error=f"{type(error).__name__}: {error}",
                        exc_info=True)
        if is_transient(error) or not w.failures.failed(self._clock()):
            return False
        await self._park(session_id, w, w.failures.reason(error))
        return True

    async def _park(self, session_id: str, w: WarmSession, reason: str) -> None:
        try:  # stored first (and a lease we still hold given back), then known here
            await self._leases.park(session_id, self._owner, reason)
        except Exception as e:  # e.g. an id the database cannot even hold: parked in memory only
            self._log.warning("session_park_write_failed", session_id=session_id, error=f"{type(e).__name__}: {e}")
        self._table.park(session_id, reason)
        metrics.SESSIONS_PARKED.inc()
        metrics.SESSION_STATUS.labels(status="parked").inc()
        self._log.error("session_parked", session_id=session_id, reason=reason)

    async def _stopped(self, session_id: str, w: WarmSession, outcome: FollowerExit, cursor: int) -> None:
        if outcome is FollowerExit.GONE and cursor <= 0:  # FROM_START (-1): not even seq 0 stored
            # 404 and nothing stored: the upstream does not know this id *yet* (or never will: a typo). No
            # tombstone, or a session created later under this id (POST /api/session accepts an id) would
            # never be mirrored; its first live event warms it again.
            metrics.SESSIONS_UNKNOWN.inc()
            self._log.warning("session_unknown_upstream", session_id=session_id, reason=w.reason)
            await self._release_if_claimed(session_id, w)
        elif outcome is FollowerExit.GONE:
            await self.tombstone(session_id)
        elif outcome in (FollowerExit.STUCK, FollowerExit.BAD_CURSOR):
            # Retrying cannot help (the upstream refuses our cursor, or no pass can move it): warming it
            # again at its next live event would be a retry storm. Parked until an explicit warm.
            await self._park(session_id, w, f"follower stopped: {outcome.value} at cursor {cursor}")
        else:
            await self._release_if_claimed(session_id, w)

    async def _release_if_claimed(self, session_id: str, w: WarmSession) -> None:
        epoch = self._table.epoch(session_id)
        if epoch is not None:
            await self.release_lease(session_id, epoch)

    async def tombstone(self, session_id: str) -> None:
        """The one place a deletion is recorded, whoever noticed it (live event or a 404 on the stream)."""
        self._table.mark_deleted(session_id)
        await self._store.mark_deleted(session_id)
        self._activity.deleted(session_id)
        self._log.info("session_deleted", session_id=session_id)
