"""The warm sessions of this process: one follower task each, running claim → follow → stop.

`warm()` starts a task unless the session is followed already, deleted, parked, held by a live peer
(asked again after the refusal cools down, or at once for insistent reasons) or we are stopping. The task
claims the lease, resumes the session's status machine, follows the durable stream, and on the way out
gives the lease back (release), keeps it for a peer (hand-off, lease lost) or records the deletion. A
crash restarts it after a backoff; one that keeps crashing parks the session (bridge.sessions.parking).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import structlog

from bridge import metrics
from bridge.config import Settings
from bridge.errors import LeaseHeld
from bridge.events import ChatEvent
from bridge.ids import valid_session_id
from bridge.legacy import SEED_KINDS
from bridge.sessions.activity import ActivityTracker
from bridge.sessions.parking import FailureStreak, is_transient
from bridge.sessions.sink import StoreSink
from bridge.store.events_store import EventStore
from bridge.store.leases import LeaseStore
from bridge.upstream.backoff import Backoff
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit

StopMode = Literal["release", "handoff", "lease_lost"]

# Triggers that try a claim even when a peer refused it moments ago.
INSISTENT = frozenset({"request", "subscriber", "orphan", "orphan_holder_dead", "last_running"})
# Explicit wishes that un-park a parked session.
UNPARKING = frozenset({"request", "subscriber"})
_CLAIM_LABELS = INSISTENT | {"active", "listed", "known", "new_events", "gone_upstream"}


def _claim_label(reason: str) -> str:
    return reason if reason in _CLAIM_LABELS else "live_event"  # bounded label values


@dataclass
class WarmSession:
    task: asyncio.Task[None]
    last_activity: float
    reason: str  # what warmed it
    failures: FailureStreak
    follower: DurableFollower | None = None
    epoch: int | None = None  # the lease epoch we hold, once claimed
    claimed_at: float | None = None
    stop_mode: StopMode = "release"


@dataclass
class _Marks:
    deleted: set[str] = field(default_factory=set)
    parked: dict[str, str] = field(default_factory=dict)  # session -> reason
    refused: dict[str, float] = field(default_factory=dict)  # session -> clock() until which a peer holds it
    subscribers: dict[str, int] = field(default_factory=dict)


class WarmRegistry:
    def __init__(self, store: EventStore, leases: LeaseStore, client: UpstreamClient, activity: ActivityTracker,
                 settings: Settings, owner: str, *, holder_dead: Callable[[str], bool],
                 clock: Callable[[], float], failure_streak: Callable[[], FailureStreak] = FailureStreak) -> None:
        self._store = store
        self._leases = leases
        self._client = client
        self._activity = activity
        self._settings = settings
        self._owner = owner
        self._holder_dead = holder_dead
        self._clock = clock
        self._failure_streak = failure_streak
        self._warm: dict[str, WarmSession] = {}
        self._marks = _Marks()
        self._tg: asyncio.TaskGroup | None = None
        self._log = structlog.get_logger("bridge.supervisor").bind(upstream=settings.upstream_name, owner=owner)

    # -- queries ----------------------------------------------------------------------------------
    def sessions(self) -> list[str]:
        return sorted(self._warm)

    def get(self, session_id: str) -> WarmSession | None:
        return self._warm.get(session_id)

    def owned(self) -> list[tuple[str, WarmSession]]:
        """Warm sessions whose lease we claimed."""
        return [(sid, w) for sid, w in self._warm.items() if w.epoch is not None]

    def subscribers(self, session_id: str) -> int:
        return self._marks.subscribers.get(session_id, 0)

    def is_deleted(self, session_id: str) -> bool:
        return session_id in self._marks.deleted

    def parked(self) -> dict[str, str]:
        return dict(self._marks.parked)

    @property
    def accepting(self) -> bool:
        return self._tg is not None

    # -- start and stop ---------------------------------------------------------------------------
    async def load_known(self) -> None:
        """Deleted sessions are never warmed again; parked ones stay parked across restarts. Every known
        session is left out of other sessions' sync-log reads from the start (docs/upstream.md §14)."""
        rows = await self._store.sessions(include_deleted=True)
        self._client.learn_aggregates(r.session_id for r in rows)
        for row in rows:
            if row.deleted:
                self._marks.deleted.add(row.session_id)
            elif row.status == "parked":
                self._marks.parked[row.session_id] = row.status_reason or "parked"

    def attach(self, tg: asyncio.TaskGroup) -> None:
        self._tg = tg
        for session_id in list(self._marks.subscribers):  # subscribed before we accepted warming
            self.warm(session_id, reason="subscriber")

    def stop_all(self, mode: StopMode) -> None:
        """No new warming; every follower stops (the task group they run in waits for them)."""
        self._tg = None
        for w in self._warm.values():
            w.stop_mode = mode
            w.task.cancel()

    # -- commands ---------------------------------------------------------------------------------
    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        """Start following a session (see the module doc). Warming an already warm session counts as
        activity (it delays idle GC)."""
        if self._tg is None or session_id in self._marks.deleted:
            return False
        if not valid_session_id(session_id):  # the one entry point: no claim, no row, no URL (bridge.ids)
            metrics.BAD_SESSION_IDS.labels(surface="warm").inc()
            return False
        now = self._clock()
        w = self._warm.get(session_id)
        if w is not None:
            w.last_activity = now
            return False
        if reason not in INSISTENT and self._marks.refused.get(session_id, 0.0) > now:
            return False
        if session_id in self._marks.parked:
            if reason not in UNPARKING:
                return False
            del self._marks.parked[session_id]
            self._log.info("session_unparked", session_id=session_id, reason=reason)
        task = self._tg.create_task(self._follow(session_id, directory), name=f"follow:{session_id}")
        self._warm[session_id] = WarmSession(task, now, reason or "unspecified", self._failure_streak())
        metrics.SESSIONS_WARM.set(len(self._warm))
        self._log.info("session_warming", session_id=session_id, reason=reason)
        return True

    def set_subscriber_count(self, session_id: str, count: int) -> None:
        """Local WebSocket clients of a session: a subscribed session is warmed and never released idle."""
        if count > 0:
            self._marks.subscribers[session_id] = count
            self.warm(session_id, reason="subscriber")
        else:
            self._marks.subscribers.pop(session_id, None)

    def cool_down(self, session_id: str) -> None:
        """A peer writes the session now: leave it alone for one sweep interval."""
        self._marks.refused[session_id] = self._clock() + self._settings.sweep_interval_s

    def lease_lost(self, session_id: str) -> None:
        w = self._warm.get(session_id)
        if w is not None:
            w.stop_mode = "lease_lost"
            self.cool_down(session_id)
            w.task.cancel()

    async def release(self, session_id: str, reason: str = "request") -> None:
        """Stop following the session and give its lease back. Never touches the upstream turn."""
        w = self._warm.get(session_id)
        if w is None:
            return
        w.stop_mode = "release"
        self._log.info("session_releasing", session_id=session_id, reason=reason)
        if reason != "idle":
            metrics.SESSION_RELEASES.labels(reason=reason if reason in ("deleted", "request") else "other").inc()
        w.task.cancel()
        # Wait for the follower without taking on its outcome; our own cancellation still reaches us
        # (suppressing CancelledError here would swallow a shutdown that arrives while we wait).
        await asyncio.wait({w.task})

    async def deleted(self, session_id: str) -> None:
        """The upstream deleted the session (live `session.deleted`): stop following, keep its history."""
        self._marks.deleted.add(session_id)
        await self.release(session_id, reason="deleted")
        await self._tombstone(session_id)

    async def release_lease(self, session_id: str, epoch: int) -> None:
        try:
            await self._store.release(session_id, epoch)
        except Exception as e:  # the lease expires on its own; never mask the original exit
            self._log.warning("lease_release_failed", session_id=session_id, error=str(e))

    # -- one session --------------------------------------------------------------------------------
    async def _follow(self, session_id: str, directory: str | None) -> None:
        w = self._warm[session_id]
        log = self._log.bind(session_id=session_id)
        backoff = Backoff(self._settings.reconnect_min_s, self._settings.reconnect_max_s)
        try:
            while True:
                try:
                    outcome, cursor = await self._follow_once(session_id, directory, w)
                    await self._stopped(session_id, w, outcome, cursor)
                except LeaseHeld as e:
                    self.cool_down(session_id)
                    log.debug("session_held_elsewhere", verdict=e.verdict.value, holder=e.holder)
                    if e.verdict.value == "deleted":
                        self._marks.deleted.add(session_id)
                    return
                except asyncio.CancelledError:
                    if w.epoch is not None and w.stop_mode == "release":
                        await self.release_lease(session_id, w.epoch)
                    raise
                except Exception as e:
                    if await self._crashed(session_id, w, e):
                        return
                    await asyncio.sleep(backoff.next_delay())
                    continue
                log.info("follower_stopped", outcome=outcome.value)
                return
        finally:
            if self._warm.get(session_id) is w:
                del self._warm[session_id]
                self._activity.forget(session_id)
            metrics.SESSIONS_WARM.set(len(self._warm))

    async def _follow_once(self, session_id: str, directory: str | None, w: WarmSession) -> tuple[FollowerExit, int]:
        s = self._settings
        w.epoch = None
        epoch, cursor = await self._store.claim(session_id, self._owner, directory, lease_ttl_s=s.lease_ttl_s,
                                                holder_dead=self._holder_dead)
        self._marks.refused.pop(session_id, None)
        w.epoch, w.claimed_at = epoch, self._clock()
        await self._activity.resume(session_id, cursor)
        self._log.info("lease_claimed", session_id=session_id, epoch=epoch, cursor_seq=cursor)
        metrics.LEASE_CLAIMS.labels(reason=_claim_label(w.reason)).inc()
        w.follower = DurableFollower(
            session_id, self._client, StoreSink(self._store, session_id, epoch), cursor,
            batch_max_events=s.batch_max_events, reconnect_min_s=s.reconnect_min_s,
            reconnect_max_s=s.reconnect_max_s, stall_s=s.durable_stall_s, upstream=s.upstream_name,
            on_committed=self._on_committed(session_id, w),
            seed=lambda: self._store.seed_rows(session_id, sorted(SEED_KINDS)),
        )
        return await w.follower.run(), w.follower.cursor

    def _on_committed(self, session_id: str, w: WarmSession) -> Callable[[Sequence[ChatEvent]], None]:
        def committed(events: Sequence[ChatEvent]) -> None:
            w.last_activity = self._clock()
            w.failures.succeeded()
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
        w.epoch = None
        self._marks.parked[session_id] = reason
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
            await self._tombstone(session_id)
        elif outcome is FollowerExit.LEASE_LOST:
            self.cool_down(session_id)  # fenced: a peer (or a newer follower of ours) writes now
        elif outcome in (FollowerExit.STUCK, FollowerExit.BAD_CURSOR):
            # Retrying cannot help (the upstream refuses our cursor, or no pass can move it): warming it
            # again at its next live event would be a retry storm. Parked until an explicit warm.
            await self._park(session_id, w, f"follower stopped: {outcome.value} at cursor {cursor}")
        else:
            await self._release_if_claimed(session_id, w)

    async def _release_if_claimed(self, session_id: str, w: WarmSession) -> None:
        if w.epoch is not None:
            await self.release_lease(session_id, w.epoch)

    async def _tombstone(self, session_id: str) -> None:
        """The one place a deletion is recorded, whoever noticed it (live event or a 404 on the stream)."""
        self._marks.deleted.add(session_id)
        await self._store.mark_deleted(session_id)
        self._activity.deleted(session_id)
        self._log.info("session_deleted", session_id=session_id)
