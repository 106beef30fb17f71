"""The warm sessions of this process: one follower task each, running claim → follow → stop
(bridge.sessions.session_run).

`warm()` starts a task unless the session is followed already, deleted, parked, held by a live peer
(asked again after the refusal cools down, or at once for insistent reasons) or we are stopping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import structlog

from bridge import metrics
from bridge.config import Settings
from bridge.ids import valid_session_id
from bridge.perf.turnstile import Turnstile
from bridge.sessions.activity import ActivityTracker
from bridge.sessions.idle_due import IdleDue
from bridge.sessions.lease_index import not_renewed, strays
from bridge.sessions.parking import FailureStreak
from bridge.sessions.session_run import INSISTENT, FollowerFactory, Marks, SessionRunner, StopMode, WarmSession
from bridge.store.ports import SessionStatusPort
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient

# Explicit wishes that un-park a parked session.
UNPARKING = frozenset({"request", "subscriber"})


class WarmRegistry:
    def __init__(self, store: EventStore, leases: SessionStatusPort, client: UpstreamClient, activity: ActivityTracker,
                 settings: Settings, owner: str, *, holder_dead: Callable[[str], bool],
                 clock: Callable[[], float], failure_streak: Callable[[], FailureStreak] = FailureStreak,
                 turnstile: Turnstile | None = None) -> None:
        self._store = store
        self._client = client
        self._activity = activity
        self._clock = clock
        self._failure_streak = failure_streak
        self._warm: dict[str, WarmSession] = {}
        self._stopped = 0  # followers stopped since start (bridge.perf.runtime.refreeze under churn)
        self._marks = Marks()
        self._idle = IdleDue[WarmSession]()  # the sweep's idle candidates, by last activity (no walk)
        self._tg: asyncio.TaskGroup | None = None
        self._log = structlog.get_logger("bridge.supervisor").bind(upstream=settings.upstream_name, owner=owner)
        self._runner = SessionRunner(store, leases, client, activity, settings, owner, self._marks, self._log,
                                     holder_dead=holder_dead, clock=clock, turnstile=turnstile or Turnstile())

    def use_followers(self, factory: FollowerFactory) -> None:
        """Followers of another upstream generation from now on (before the first session is warmed)."""
        self._runner.follower_factory = factory

    # -- queries ----------------------------------------------------------------------------------
    def sessions(self) -> list[str]:
        return sorted(self._warm)

    def get(self, session_id: str) -> WarmSession | None:
        return self._warm.get(session_id)

    # The keeper's and the sweep's questions, answered without a Python walk of every warm session
    # (docs/lifecycle.md "Timers at 10,000 sessions"): the same answers as a walk of the claimed sessions.
    def not_renewed(self, held: Mapping[str, int]) -> list[str]:
        """Claimed sessions whose epoch the heartbeat did not renew (bridge.sessions.lease_index)."""
        return not_renewed(self._runner.epochs, held)

    def strays(self, held: Mapping[str, int]) -> list[str]:
        """Held leases with no warm session (bridge.sessions.lease_index)."""
        return list(strays(self._warm, held))

    def idle_owned(self, horizon: float) -> list[tuple[str, WarmSession]]:
        """Claimed sessions whose last activity is at or before `horizon` (bridge.sessions.idle_due)."""
        return [(sid, w) for sid, w in self._idle.due(horizon, self._activity_of) if w.epoch is not None]

    def _activity_of(self, session_id: str, w: WarmSession) -> float | None:
        return w.last_activity if self._warm.get(session_id) is w else None

    def subscribers(self, session_id: str) -> int:
        return self._marks.subscribers.get(session_id, 0)

    def is_deleted(self, session_id: str) -> bool:
        return session_id in self._marks.deleted

    def parked(self) -> dict[str, str]:
        return dict(self._marks.parked)

    def footprint(self) -> dict[str, int]:
        """How many sessions each per-session structure of the registry holds: every one follows the warm
        sessions (or the marks below) and none grows with sessions cycled (docs/operations.md)."""
        return {"warm": len(self._warm), "epochs": len(self._runner.epochs), "idle_index": len(self._idle),
                "early_twins": sum(1 for w in self._warm.values() if w.early is not None),
                "refused": len(self._marks.refused), "parked": len(self._marks.parked),
                "deleted": len(self._marks.deleted), "subscribed": len(self._marks.subscribers)}

    def churn(self) -> tuple[int, int]:
        """(followers stopped since start, warm sessions now): the garbage collector's cue
        (bridge.perf.runtime.refreeze)."""
        return self._stopped, len(self._warm)

    def forget_expired_refusals(self) -> None:
        """A peer's refusal is only a cool-down: expired ones are dropped, not kept for every session ever
        refused."""
        now = self._clock()
        refused = self._marks.refused
        for sid in [sid for sid, until in refused.items() if until <= now]:
            del refused[sid]

    @property
    def accepting(self) -> bool:
        return self._tg is not None

    # -- start and stop ---------------------------------------------------------------------------
    async def load_known(self) -> None:
        """Deleted sessions are never warmed again; parked ones stay parked across restarts. Every known
        session is left out of other sessions' sync-log reads from the start (docs/upstream.md §14)."""
        rows = await self._store.sessions(include_deleted=True)
        self._client.note_sizes({r.session_id: r.cursor_seq for r in rows})
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
        w = self._warm[session_id] = WarmSession(task, now, reason or "unspecified", self._failure_streak())
        self._idle.track(session_id, w, now)
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

    def lease_lost(self, session_id: str) -> None:
        w = self._warm.get(session_id)
        if w is not None:
            w.stop_mode = "lease_lost"
            self._runner.cool_down(session_id)
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
        await self._runner.tombstone(session_id)

    async def release_lease(self, session_id: str, epoch: int) -> None:
        await self._runner.release_lease(session_id, epoch)

    async def _follow(self, session_id: str, directory: str | None) -> None:
        w = self._warm[session_id]
        try:
            await self._runner.run(session_id, directory, w)
        finally:
            if self._warm.get(session_id) is w:
                del self._warm[session_id]
                self._runner.epochs.pop(session_id, None)
                self._activity.forget(session_id)
            # The idle index may hold `w` until its horizon passes (idle_due): not its follower, whose
            # turn state and waiting twins are the session's memory.
            w.follower = None
            w.early = None
            self._stopped += 1
            metrics.SESSIONS_WARM.set(len(self._warm))
