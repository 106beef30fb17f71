"""Owns the warm sessions of one upstream: warming, leases, adoption, idle GC and status.

- `warm()` starts a follower, which first *claims* the session's lease (conditional: free, expired,
  ours, or its holder is known dead); a refused claim means another live bridge follows it.
- The heartbeat renews our incarnation row and every lease we hold; a lease that was not renewed is
  lost, and its follower is stopped (its writes were fenced already, by the epoch in write_batch).
- The sweep adopts orphans (expired leases, holders known dead, sessions last known running) and
  releases idle sessions (bridge.sessions.gc).
- The active poller reads `GET /api/session/active` quickly while a session runs, backing off otherwise;
  it feeds the status machine (bridge.sessions.status) and warms sessions that became active.

`release()` only stops *our* following of a session (cursor and history stay, the upstream turn is
untouched). Stopping an upstream turn is `interrupt()`, which nothing in the bridge calls on its own.
A clean shutdown *hands off* its leases (expires them, owner kept) so peers adopt them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import structlog

from bridge import metrics
from bridge.config import Settings
from bridge.events import ChatEvent
from bridge.ops.outage import OutageLog
from bridge.sessions.gaps import find_gaps
from bridge.sessions.gc import WarmFacts, release_reason
from bridge.sessions.lease import adoption_reason, local_holder_dead
from bridge.sessions.status import Status, Transition, TurnTracker
from bridge.store.events_store import EventStore, LeaseLost
from bridge.store.leases import LeaseHeld, LeaseStore
from bridge.upstream.backoff import Backoff
from bridge.upstream.client import UpstreamClient, UpstreamError
from bridge.upstream.durable import DurableFollower, FollowerExit, LeaseLostError

StatusCallback = Callable[[str, str, str | None], None]
StopMode = Literal["release", "handoff", "lease_lost"]

# Triggers that try a claim even when a peer refused it moments ago.
_INSISTENT = frozenset({"request", "subscriber", "orphan", "orphan_holder_dead", "last_running"})
# Settle time before an open step is closed as interrupted (see bridge.sessions.status).
TURN_SETTLE_S = 2.0


class _StoreSink:
    """Adapts EventStore to the follower's EventSink, bound to one session and lease epoch."""

    def __init__(self, store: EventStore, session_id: str, epoch: int) -> None:
        self._store = store
        self._session_id = session_id
        self._epoch = epoch

    async def write(self, events: Sequence[ChatEvent], received_at: datetime) -> int:
        try:
            result = await self._store.write_batch(self._session_id, self._epoch, events, received_at)
        except LeaseLost as e:
            raise LeaseLostError(str(e)) from e
        if result.duplicates:
            metrics.EVENTS_DUPLICATE.inc(result.duplicates)
        if result.rejected:
            metrics.REJECTS.labels(reason="conflicting_duplicate").inc(result.rejected)
        return result.cursor_seq

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None = None) -> None:
        await self._store.reject_frame(self._session_id, reason, raw, received_at, seq)


@dataclass
class _Warm:
    task: asyncio.Task[None]
    last_activity: float
    follower: DurableFollower | None = None
    epoch: int | None = None
    claimed_at: float | None = None
    last_seq: int = 0
    tracker: TurnTracker | None = None
    stop_mode: StopMode = "release"
    reason: str = ""  # what warmed it


@dataclass(frozen=True)
class _Gap:
    from_seq: int
    to_seq: int


@dataclass(frozen=True)
class _LegacySeen:
    seq: int


_Write = Transition | _Gap | _LegacySeen


@dataclass
class _Outbox:
    """Status, gap and completeness writes, done in order by one task (follower callbacks are sync)."""

    queue: asyncio.Queue[tuple[str, _Write]] = field(default_factory=asyncio.Queue)


_CLAIM_LABELS = _INSISTENT | {"active", "listed", "known", "new_events", "gone_upstream"}


def _claim_label(reason: str) -> str:
    return reason if reason in _CLAIM_LABELS else "live_event"  # bounded label values


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class FollowerSupervisor:
    def __init__(
        self,
        store: EventStore,
        client: UpstreamClient,
        settings: Settings,
        owner: str,
        on_committed: Callable[[str, Sequence[ChatEvent]], None] | None = None,
        *,
        on_status: StatusCallback | None = None,
        leases: LeaseStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        pid_alive: Callable[[int], bool] = _pid_alive,
        hostname: str | None = None,
    ) -> None:
        self._store = store
        self._client = client
        self._settings = settings
        self.owner = owner
        self._on_committed = on_committed
        self.on_status = on_status  # the lead wires the hub's push here (issue #3)
        self._leases = leases or LeaseStore(store.engine, store.upstream)
        self._clock = clock
        self._pid_alive = pid_alive
        self._hostname = hostname or socket.gethostname()
        self._warm: dict[str, _Warm] = {}
        self._deleted: set[str] = set()
        self._refused: dict[str, float] = {}  # session -> clock() until which a peer holds it
        self._subscribers: dict[str, int] = {}
        self._active: set[str] = set()
        self._legacy_marked: set[str] = set()
        self._outbox = _Outbox()
        self._poll_wake = asyncio.Event()
        self._tg: asyncio.TaskGroup | None = None
        self._stop = asyncio.Event()
        self._log = structlog.get_logger("bridge.supervisor").bind(upstream=settings.upstream_name, owner=owner)
        # Heartbeats and sweeps fail together while the database is away: logged once, not every beat.
        self.database_outage = OutageLog(self._log, "database", clock=clock)

    # -- queries ----------------------------------------------------------------------------------
    def warm_sessions(self) -> list[str]:
        return sorted(self._warm)

    def is_warm(self, session_id: str) -> bool:
        return session_id in self._warm

    def follower(self, session_id: str) -> DurableFollower | None:
        w = self._warm.get(session_id)
        return w.follower if w else None

    def status(self, session_id: str) -> tuple[str, str | None] | None:
        """The status this process derived for a warm session it owns (None otherwise)."""
        w = self._warm.get(session_id)
        if w is None or w.tracker is None:
            return None
        return w.tracker.status.value, w.tracker.reason

    def owns(self, session_id: str) -> bool:
        w = self._warm.get(session_id)
        return w is not None and w.epoch is not None

    @property
    def running(self) -> bool:
        return self._tg is not None and not self._stop.is_set()

    # -- commands ---------------------------------------------------------------------------------
    def forget_deleted(self, session_ids: set[str]) -> None:
        self._deleted |= session_ids

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        """Start following a session unless it is already followed, deleted, held by a live peer (asked
        again after the refusal cools down, or at once for insistent reasons), or we are stopping.
        Warming an already warm session counts as activity (it delays idle GC)."""
        if self._tg is None or self._stop.is_set() or session_id in self._deleted:
            return False
        now = self._clock()
        w = self._warm.get(session_id)
        if w is not None:
            w.last_activity = now
            return False
        if reason not in _INSISTENT and self._refused.get(session_id, 0.0) > now:
            return False
        task = self._tg.create_task(self._keep_following(session_id, directory), name=f"follow:{session_id}")
        self._warm[session_id] = _Warm(task=task, last_activity=now, reason=reason or "unspecified")
        metrics.SESSIONS_WARM.set(len(self._warm))
        self._log.info("session_warming", session_id=session_id, reason=reason)
        return True

    def notify_seen(self, session_id: str, seq: int) -> None:
        f = self.follower(session_id)
        if f is not None:
            f.notify_seen(seq)

    def notify_legacy_seq(self, session_id: str, seq: int) -> None:
        """/api/event showed a durable seq of a legacy-only event (`session.updated`, `message.updated`,
        `message.part.updated`): it will never reach the durable stream (PROTOCOL.md §3.1), so the session
        is marked incomplete now (the gap range itself is recorded when the next v2 event arrives)."""
        if session_id in self._legacy_marked:
            return
        self._legacy_marked.add(session_id)
        self._outbox.queue.put_nowait((session_id, _LegacySeen(seq)))

    def set_subscriber_count(self, session_id: str, count: int) -> None:
        """The hub tells how many local WebSocket clients follow a session: a subscribed session is
        warmed and never released by idle GC."""
        if count > 0:
            self._subscribers[session_id] = count
            self.warm(session_id, reason="subscriber")
        else:
            self._subscribers.pop(session_id, None)

    async def deleted(self, session_id: str) -> None:
        """The upstream deleted the session: stop following, keep its history."""
        self._deleted.add(session_id)
        await self.release(session_id, reason="deleted")
        await self._store.mark_deleted(session_id)
        self._publish_status(session_id, Transition(Status.DELETED, "deleted upstream"))
        self._log.info("session_deleted", session_id=session_id)

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
        with contextlib.suppress(asyncio.CancelledError):
            await w.task

    async def interrupt(self, session_id: str) -> None:
        """Stop the upstream turn (`POST /api/session/{id}/interrupt`). Only on an explicit request."""
        self._log.info("session_interrupt_requested", session_id=session_id)
        await self._client.interrupt(session_id)

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Runs until stop(); then stops every follower and hands their leases off to peers."""
        # The heartbeat loop's first beat registers our incarnation row. The task group opens at once,
        # so warm() calls made right after start (the daemon's start-up warming) are not lost.
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                loops = [
                    tg.create_task(self._heartbeat_loop(), name="lease-heartbeat"),
                    tg.create_task(self._sweep_loop(), name="lease-sweep"),
                    tg.create_task(self._active_loop(), name="active-poller"),
                    tg.create_task(self._outbox_loop(), name="status-writer"),
                ]
                await self._stop.wait()
                for t in loops:
                    t.cancel()
                for w in list(self._warm.values()):
                    w.stop_mode = "handoff"
                    w.task.cancel()
        finally:
            self._tg = None
            try:
                await self._leases.hand_off(self.owner)
            except Exception as e:  # the leases expire on their own; peers adopt within the TTL
                self._log.warning("lease_hand_off_failed", error=str(e))
            else:
                self._log.info("leases_handed_off")

    # -- one session --------------------------------------------------------------------------------
    def _holder_dead(self, owner: str) -> bool:
        if not self._settings.lease_pid_probe:
            return False
        return local_holder_dead(owner, self._hostname, self._pid_alive)

    async def _keep_following(self, session_id: str, directory: str | None) -> None:
        s = self._settings
        backoff = Backoff(s.reconnect_min_s, s.reconnect_max_s)
        log = self._log.bind(session_id=session_id)
        w = self._warm[session_id]
        try:
            while True:
                epoch: int | None = None
                try:
                    try:
                        epoch, cursor = await self._store.claim(
                            session_id, self.owner, directory, lease_ttl_s=s.lease_ttl_s,
                            holder_dead=self._holder_dead,
                        )
                    except LeaseHeld as e:
                        self._refused[session_id] = self._clock() + s.sweep_interval_s
                        log.debug("session_held_elsewhere", verdict=e.verdict.value, holder=e.holder)
                        if e.verdict.value == "deleted":
                            self._deleted.add(session_id)
                        return
                    self._refused.pop(session_id, None)
                    w.epoch, w.claimed_at, w.last_seq = epoch, self._clock(), cursor
                    w.tracker = await self._resume_tracker(session_id)
                    log.info("lease_claimed", epoch=epoch, cursor_seq=cursor)
                    metrics.LEASE_CLAIMS.labels(reason=_claim_label(w.reason)).inc()
                    follower = DurableFollower(
                        session_id,
                        self._client,
                        _StoreSink(self._store, session_id, epoch),
                        cursor,
                        batch_max_events=s.batch_max_events,
                        reconnect_min_s=s.reconnect_min_s,
                        reconnect_max_s=s.reconnect_max_s,
                        stall_s=s.durable_stall_s,
                        upstream=s.upstream_name,
                        on_committed=self._committed_callback(session_id, w),
                    )
                    w.follower = follower
                    outcome = await follower.run()
                except asyncio.CancelledError:
                    if epoch is not None and w.stop_mode == "release":
                        await self._release_quietly(session_id, epoch)
                    raise
                except Exception as e:
                    # A crash in one session never stops the others: restart from the stored cursor.
                    metrics.FOLLOWER_CRASHES.inc()
                    log.error("follower_crashed", error=f"{type(e).__name__}: {e}", exc_info=True)
                    await asyncio.sleep(backoff.next_delay())
                    continue
                if outcome is FollowerExit.GONE and follower.cursor == 0:
                    # 404 and nothing stored: the upstream does not know this id *yet* (or never will: a
                    # typo). No tombstone, or a session created later under this id (POST /api/session
                    # accepts an id) would never be mirrored; its first live event warms it again.
                    metrics.SESSIONS_UNKNOWN.inc()
                    log.warning("session_unknown_upstream", reason=w.reason)
                    await self._release_quietly(session_id, epoch)
                elif outcome is FollowerExit.GONE:
                    self._deleted.add(session_id)
                    await self._store.mark_deleted(session_id)
                    self._publish_status(session_id, Transition(Status.DELETED, "deleted upstream"))
                elif outcome is FollowerExit.LEASE_LOST:
                    # Fenced: a peer (or a newer follower of ours) writes now. Give up quietly.
                    self._refused[session_id] = self._clock() + s.sweep_interval_s
                elif epoch is not None:
                    await self._release_quietly(session_id, epoch)
                log.info("follower_stopped", outcome=outcome.value)
                return
        finally:
            if self._warm.get(session_id) is w:
                del self._warm[session_id]
            metrics.SESSIONS_WARM.set(len(self._warm))

    async def _resume_tracker(self, session_id: str) -> TurnTracker:
        """Continue the status machine from what is stored: a turn the previous owner saw start is still
        open for us (it may end as idle, stalled or interrupted)."""
        tracker = TurnTracker(self._settings.stall_timeout_s, TURN_SETTLE_S)
        state = await self._leases.turn_state(session_id)
        if state.status == Status.RUNNING.value:
            tracker.on_events(state.tail_kinds, self._clock())
            # Running without stored turn events (e.g. seen only in /api/session/active): still running,
            # so that the next "not active" observation settles it instead of leaving it running forever.
            tracker.status, tracker.reason = Status.RUNNING, None
            self._poll_wake.set()
        elif state.status in Status.__members__.values():
            tracker.status, tracker.reason = Status(state.status), state.reason
        return tracker

    def _committed_callback(self, session_id: str, w: _Warm) -> Callable[[Sequence[ChatEvent]], None]:
        cb = self._on_committed

        def committed(events: Sequence[ChatEvent]) -> None:
            now = self._clock()
            w.last_activity = now
            seqs = [e.seq for e in events if e.seq is not None]
            for a, b in find_gaps(w.last_seq, seqs):
                self._outbox.queue.put_nowait((session_id, _Gap(a, b)))
            if seqs:
                w.last_seq = max(w.last_seq, *seqs)
            if w.tracker is not None:
                tr = w.tracker.on_events([e.kind for e in events], now)
                if tr is not None:
                    self._publish_status(session_id, tr)
            if cb is not None:
                cb(session_id, events)

        return committed

    def _publish_status(self, session_id: str, tr: Transition) -> None:
        if tr.status is Status.RUNNING:
            self._poll_wake.set()
        self._outbox.queue.put_nowait((session_id, tr))

    async def _release_quietly(self, session_id: str, epoch: int) -> None:
        try:
            await self._store.release(session_id, epoch)
        except Exception as e:  # the lease expires on its own; never mask the original exit
            self._log.warning("lease_release_failed", session_id=session_id, error=str(e))

    # -- background loops ---------------------------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        s = self._settings
        while True:
            started = self._clock()
            try:
                held = await self._leases.heartbeat(self.owner, self._hostname, os.getpid(), s.lease_ttl_s)
            except Exception as e:
                self.database_outage.failed(f"lease_heartbeat_failed: {type(e).__name__}: {e}")
            else:
                self.database_outage.succeeded()
                self._stop_lost(held, started)
                await self._release_strays(held)
            await asyncio.sleep(s.heartbeat_interval_s)

    async def _release_strays(self, held: dict[str, int]) -> None:
        """A lease we hold without a follower (a claim cancelled right as it committed) would otherwise
        be renewed forever and never adopted: give it back."""
        for sid, epoch in held.items():
            if sid not in self._warm:
                self._log.warning("stray_lease_released", session_id=sid, epoch=epoch)
                await self._release_quietly(sid, epoch)

    def _stop_lost(self, held: dict[str, int], started: float) -> None:
        """Leases we claimed before this heartbeat and that it could not renew are gone: stop their
        followers (they could not write anyway: the epoch fences them)."""
        for sid, w in list(self._warm.items()):
            if w.epoch is None or w.claimed_at is None or w.claimed_at >= started:
                continue
            if held.get(sid) != w.epoch:
                metrics.LEASE_LOSSES.inc()
                self._log.warning("lease_lost", session_id=sid, epoch=w.epoch, now_held=held.get(sid))
                w.stop_mode = "lease_lost"
                self._refused[sid] = self._clock() + self._settings.sweep_interval_s
                w.task.cancel()

    async def _sweep_loop(self) -> None:
        while True:
            try:
                await self._adopt_orphans()
                await self._collect_idle()
            except Exception as e:
                self.database_outage.failed(f"lease_sweep_failed: {type(e).__name__}: {e}")
            await asyncio.sleep(self._settings.sweep_interval_s)

    async def _adopt_orphans(self) -> None:
        for c in await self._leases.adoption_candidates(self.owner):
            if c.session_id in self._warm or c.session_id in self._deleted:
                continue
            reason = adoption_reason(c.owner, c.expired, self._holder_dead)
            if reason is not None:
                self.warm(c.session_id, c.directory, reason=reason)

    async def _collect_idle(self) -> None:
        now = self._clock()
        for sid, w in list(self._warm.items()):
            if w.tracker is None or w.epoch is None:
                continue
            facts = WarmFacts(now, w.last_activity, w.tracker.status, sid in self._active,
                              self._subscribers.get(sid, 0))
            reason = release_reason(facts, self._settings.idle_ttl_s)
            if reason is not None:
                self._log.info("session_idle_release", session_id=sid, why=reason)
                metrics.SESSION_RELEASES.labels(reason="idle").inc()
                await self.release(sid, reason="idle")

    async def _active_loop(self) -> None:
        """Poll /api/session/active: every active_poll_s while a turn may run, else backing off."""
        s = self._settings
        delay = s.active_poll_s
        while True:
            self._poll_wake.clear()
            observed_at = self._clock()
            try:
                active = set(await self._client.active())
            except UpstreamError as e:
                self._log.debug("active_poll_failed", error=str(e))
            else:
                self._apply_active(active, observed_at)
            busy = any(w.tracker is not None and w.tracker.wants_polling for w in self._warm.values())
            delay = s.active_poll_s if busy else min(delay * 2, s.active_poll_idle_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._poll_wake.wait()
                    delay = s.active_poll_s

    def _apply_active(self, active: set[str], observed_at: float) -> None:
        now = self._clock()
        self._active = active
        for sid in active:
            self.warm(sid, reason="active")
        for sid, w in list(self._warm.items()):
            if w.tracker is None:
                continue
            tr = w.tracker.on_active(sid in active, observed_at, now)
            if tr is not None:
                self._publish_status(sid, tr)

    async def _outbox_loop(self) -> None:
        while True:
            sid, item = await self._outbox.queue.get()
            try:
                if isinstance(item, Transition):
                    await self._write_status(sid, item)
                elif isinstance(item, _Gap):
                    await self._leases.record_gap(sid, item.from_seq, item.to_seq)
                    metrics.SESSION_GAPS.inc()
                    self._log.warning("seq_gap_recorded", session_id=sid, from_seq=item.from_seq, to_seq=item.to_seq)
                else:
                    await self._leases.legacy_seq_seen(sid, item.seq)
                    self._log.warning("legacy_turn_seen", session_id=sid, seq=item.seq)
            except Exception as e:
                self._log.warning("lifecycle_write_failed", session_id=sid, error=f"{type(e).__name__}: {e}")

    async def _write_status(self, sid: str, tr: Transition) -> None:
        if tr.status is not Status.DELETED:
            stored = await self._leases.set_status(sid, self.owner, tr.status.value, tr.reason)
            if not stored:
                return  # not ours any more: the new owner speaks for it
        self._log.info("session_status", session_id=sid, status=tr.status.value, reason=tr.reason)
        metrics.SESSION_STATUS.labels(status=tr.status.value).inc()
        if self.on_status is not None:
            try:
                self.on_status(sid, tr.status.value, tr.reason)
            except Exception as e:  # a subscriber bug must not stop status tracking
                self._log.error("on_status_failed", session_id=sid, error=f"{type(e).__name__}: {e}")
