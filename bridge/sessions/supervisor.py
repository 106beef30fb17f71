"""Owns the durable followers of one upstream: starts them (`warm`), restarts them after unexpected
errors from the stored cursor, stops them (`release`), and gives their leases back on shutdown.

`release()` only stops *our* following of a session (cursor and history stay, the upstream turn is
untouched). Stopping an upstream turn is `interrupt`, which the bridge never does on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from bridge import metrics
from bridge.config import Settings
from bridge.events import ChatEvent
from bridge.store.events_store import EventStore, LeaseLost
from bridge.upstream.backoff import Backoff
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower, FollowerExit, LeaseLostError


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
    follower: DurableFollower | None = None


class FollowerSupervisor:
    def __init__(
        self,
        store: EventStore,
        client: UpstreamClient,
        settings: Settings,
        owner: str,
        on_committed: Callable[[str, Sequence[ChatEvent]], None] | None = None,
    ) -> None:
        self._store = store
        self._client = client
        self._settings = settings
        self.owner = owner
        self._on_committed = on_committed
        self._warm: dict[str, _Warm] = {}
        self._deleted: set[str] = set()
        self._tg: asyncio.TaskGroup | None = None
        self._stop = asyncio.Event()
        self._log = structlog.get_logger("bridge.supervisor").bind(upstream=settings.upstream_name)

    # -- queries ----------------------------------------------------------------------------------
    def warm_sessions(self) -> list[str]:
        return sorted(self._warm)

    def is_warm(self, session_id: str) -> bool:
        return session_id in self._warm

    def follower(self, session_id: str) -> DurableFollower | None:
        w = self._warm.get(session_id)
        return w.follower if w else None

    @property
    def running(self) -> bool:
        return self._tg is not None and not self._stop.is_set()

    # -- commands ---------------------------------------------------------------------------------
    def forget_deleted(self, session_ids: set[str]) -> None:
        self._deleted |= session_ids

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        """Start following a session unless it is already followed, deleted, or we are stopping."""
        if self._tg is None or self._stop.is_set():
            return False
        if session_id in self._warm or session_id in self._deleted:
            return False
        task = self._tg.create_task(self._keep_following(session_id, directory), name=f"follow:{session_id}")
        self._warm[session_id] = _Warm(task=task)
        metrics.SESSIONS_WARM.set(len(self._warm))
        self._log.info("session_warming", session_id=session_id, reason=reason)
        return True

    def notify_seen(self, session_id: str, seq: int) -> None:
        f = self.follower(session_id)
        if f is not None:
            f.notify_seen(seq)

    async def deleted(self, session_id: str) -> None:
        """The upstream deleted the session: stop following, keep its history."""
        self._deleted.add(session_id)
        await self.release(session_id)
        await self._store.mark_deleted(session_id)
        self._log.info("session_deleted", session_id=session_id)

    async def release(self, session_id: str) -> None:
        w = self._warm.get(session_id)
        if w is None:
            return
        w.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await w.task

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Runs until stop(); then cancels every follower (each gives its lease back)."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            await self._stop.wait()
            for w in list(self._warm.values()):
                w.task.cancel()
        self._tg = None

    # -- one session --------------------------------------------------------------------------------
    async def _keep_following(self, session_id: str, directory: str | None) -> None:
        s = self._settings
        backoff = Backoff(s.reconnect_min_s, s.reconnect_max_s)
        log = self._log.bind(session_id=session_id)
        try:
            while True:
                epoch: int | None = None
                try:
                    epoch, cursor = await self._store.claim(session_id, self.owner, directory)
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
                        on_committed=self._committed_callback(session_id),
                    )
                    self._warm[session_id].follower = follower
                    outcome = await follower.run()
                except asyncio.CancelledError:
                    if epoch is not None:
                        await self._release_quietly(session_id, epoch)
                    raise
                except Exception as e:
                    # A crash in one session never stops the others: restart from the stored cursor.
                    metrics.FOLLOWER_CRASHES.inc()
                    log.error("follower_crashed", error=f"{type(e).__name__}: {e}", exc_info=True)
                    await asyncio.sleep(backoff.next_delay())
                    continue
                if outcome is FollowerExit.GONE:
                    self._deleted.add(session_id)
                    await self._store.mark_deleted(session_id)
                elif outcome is not FollowerExit.LEASE_LOST and epoch is not None:
                    await self._release_quietly(session_id, epoch)
                log.info("follower_stopped", outcome=outcome.value)
                return
        finally:
            self._warm.pop(session_id, None)
            metrics.SESSIONS_WARM.set(len(self._warm))

    def _committed_callback(self, session_id: str) -> Callable[[Sequence[ChatEvent]], None] | None:
        cb = self._on_committed
        if cb is None:
            return None
        return lambda events: cb(session_id, events)

    async def _release_quietly(self, session_id: str, epoch: int) -> None:
        try:
            await self._store.release(session_id, epoch)
        except Exception as e:  # the lease expires on its own; never mask the original exit
            self._log.warning("lease_release_failed", session_id=session_id, error=str(e))
