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
from bridge.sessions.parking import FailureStreak
from bridge.sessions.session_run import INSISTENT, RunnerParts, SessionRunner
from bridge.sessions.warm_table import StopMode, WarmSession, WarmTable

# Explicit wishes that un-park a parked session.
UNPARKING = frozenset({"request", "subscriber"})


class WarmRegistry:
    """The warm sessions' commands; their state is one `WarmTable` (bridge.sessions.warm_table)."""

    def __init__(self, parts: RunnerParts, settings: Settings, owner: str,
                 failure_streak: Callable[[], FailureStreak] = FailureStreak) -> None:
        self._store = parts.store
        self._client = parts.client
        self._activity = parts.activity
        self._clock = parts.clock
        self._failure_streak = failure_streak
        self._table = WarmTable()
        self._tg: asyncio.TaskGroup | None = None
        self._log = structlog.get_logger("bridge.supervisor").bind(upstream=settings.upstream_name, owner=owner)
        self._runner = SessionRunner(parts, self._table, settings, owner, self._log)

    # -- queries ----------------------------------------------------------------------------------
    def sessions(self) -> list[str]:
        return self._table.sessions()

    def get(self, session_id: str) -> WarmSession | None:
        return self._table.get(session_id)

    def epoch(self, session_id: str) -> int | None:
        """The lease epoch we hold for a warm session (None: not claimed)."""
        return self._table.epoch(session_id)

    # The keeper's and the sweep's questions, answered without a Python walk of every warm session
    # (docs/lifecycle.md "Timers at 10,000 sessions"): the same answers as a walk of the claimed sessions.
    def not_renewed(self, held: Mapping[str, int]) -> list[str]:
        return self._table.not_renewed(held)

    def strays(self, held: Mapping[str, int]) -> list[str]:
        return self._table.strays(held)

    def idle_owned(self, horizon: float) -> list[tuple[str, WarmSession]]:
        return self._table.idle_owned(horizon)

    def subscribers(self, session_id: str) -> int:
        return self._table.subscribers(session_id)

    def is_deleted(self, session_id: str) -> bool:
        return self._table.is_deleted(session_id)

    def parked(self) -> dict[str, str]:
        return self._table.parked()

    def footprint(self) -> dict[str, int]:
        """How many sessions each per-session structure of the registry holds (docs/operations.md)."""
        return self._table.footprint()

    def churn(self) -> tuple[int, int]:
        """(followers stopped since start, warm sessions now): the garbage collector's cue
        (bridge.perf.runtime.refreeze)."""
        return self._table.churn()

    def forget_expired_refusals(self) -> None:
        """A peer's refusal is only a cool-down: expired ones are dropped, not kept for every session ever
        refused."""
        self._table.forget_refusals_before(self._clock())

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
                self._table.mark_deleted(row.session_id)
            elif row.status == "parked":
                self._table.park(row.session_id, row.status_reason or "parked")

    def attach(self, tg: asyncio.TaskGroup) -> None:
        self._tg = tg
        for session_id in self._table.subscribed():  # subscribed before we accepted warming
            self.warm(session_id, reason="subscriber")

    def stop_all(self, mode: StopMode) -> None:
        """No new warming; every follower stops (the task group they run in waits for them)."""
        self._tg = None
        for sid in self._table.sessions():
            w = self._table.get(sid)
            if w is not None:
                self._table.stop(w, mode)

    # -- commands ---------------------------------------------------------------------------------
    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        """Start following a session (see the module doc). Warming an already warm session counts as
        activity (it delays idle GC)."""
        if self._tg is None or self._table.is_deleted(session_id):
            return False
        if not valid_session_id(session_id):  # the one entry point: no claim, no row, no URL (bridge.ids)
            metrics.BAD_SESSION_IDS.labels(surface="warm").inc()
            return False
        now = self._clock()
        if self._table.touch(session_id, now):
            return False
        if reason not in INSISTENT and self._table.refused_until(session_id) > now:
            return False
        if self._table.is_parked(session_id):
            if reason not in UNPARKING:
                return False
            self._table.unpark(session_id)
            self._log.info("session_unparked", session_id=session_id, reason=reason)
        task = self._tg.create_task(self._follow(session_id, directory), name=f"follow:{session_id}")
        self._table.add(session_id, task, now, reason or "unspecified", self._failure_streak())
        metrics.SESSIONS_WARM.set(self._table.claimed())
        self._log.info("session_warming", session_id=session_id, reason=reason)
        return True

    def live_skip_reason(self, session_id: str) -> str | None:
        """Why a live frame of the session would do nothing here, or None: it is not warm here, no subscriber
        here watches it, and `warm()` for a live event would not start it — a peer holds it
        (`held_elsewhere`, until the refusal cools down), it is `deleted` or `parked` (live events never
        un-park). bridge.upstream.live drops such frames before decoding them (docs/operations.md "Workers")."""
        t = self._table
        if self._tg is None or t.get(session_id) is not None or t.subscribers(session_id) > 0:
            return None
        if t.is_deleted(session_id):
            return "deleted"
        if t.is_parked(session_id):
            return "parked"
        return "held_elsewhere" if t.refused_until(session_id) > self._clock() else None

    def set_subscriber_count(self, session_id: str, count: int) -> None:
        """Local WebSocket clients of a session: a subscribed session is warmed and never released idle."""
        self._table.set_subscribers(session_id, count)
        if count > 0:
            self.warm(session_id, reason="subscriber")

    def lease_lost(self, session_id: str) -> None:
        w = self._table.get(session_id)
        if w is not None:
            self._runner.cool_down(session_id)
            self._table.stop(w, "lease_lost")

    async def release(self, session_id: str, reason: str = "request") -> None:
        """Stop following the session and give its lease back. Never touches the upstream turn."""
        w = self._table.get(session_id)
        if w is None:
            return
        self._log.info("session_releasing", session_id=session_id, reason=reason)
        if reason != "idle":
            metrics.SESSION_RELEASES.labels(reason=reason if reason in ("deleted", "request") else "other").inc()
        self._table.stop(w, "release")
        # Wait for the follower without taking on its outcome; our own cancellation still reaches us
        # (suppressing CancelledError here would swallow a shutdown that arrives while we wait).
        await asyncio.wait({w.task})

    async def deleted(self, session_id: str) -> None:
        """The upstream deleted the session (live `session.deleted`): stop following, keep its history."""
        self._table.mark_deleted(session_id)
        await self.release(session_id, reason="deleted")
        await self._runner.tombstone(session_id)

    async def release_lease(self, session_id: str, epoch: int) -> None:
        await self._runner.release_lease(session_id, epoch)

    async def _follow(self, session_id: str, directory: str | None) -> None:
        w = self._table.get(session_id)
        if w is None:  # never: added right after its task was created, before the task runs
            return
        try:
            await self._runner.run(session_id, directory, w)
        finally:
            if self._table.removed(session_id, w):
                self._activity.forget(session_id)
            metrics.SESSIONS_WARM.set(self._table.claimed())
