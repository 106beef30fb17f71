"""From "a batch of session S committed up to seq N" to `event` messages for the live subscribers.

Wake-ups come from every process's writer, this one's included, through PostgreSQL `LISTEN/NOTIFY`
(`CommitListener`; the NOTIFY is sent in the writing transaction). The feed reads the committed rows back by seq
(`seq > last published`), so what it publishes is exactly what is stored, in seq order, whichever process
wrote it. Wake-ups coalesce: one read covers any number of notifications, and the sessions woken meanwhile
are read together, `BATCH` per statement (bridge.store.reads.batch). A first subscriber also wakes the feed:
the hub is built with the feed's `wake` (bridge.fanout.service.FanoutPart).

Session statuses arrive on their own channel (`bridge_status`), from every process including this one,
each with its `status_version`: the hub never sends a subscriber an older status after a newer one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg  # type: ignore[import-untyped]
import structlog

from bridge.backoff import Backoff
from bridge.fanout import metrics
from bridge.fanout.hub import Hub
from bridge.fanout.protocol import replay_frames
from bridge.store.notices import (
    COMMAND_CHANNEL,
    NOTIFY_CHANNEL,
    STATUS_CHANNEL,
    CommandNotice,
    StatusNotice,
    parse_command_notice,
    parse_notice,
    parse_status_notice,
)
from bridge.store.reads import FanoutStore

# Woken sessions read per statement: a burst across a thousand sessions is a few reads, not a thousand.
BATCH = 200


class DurableFeed:
    def __init__(self, hub: Hub, store: FanoutStore, *, page: int = 500) -> None:
        self._hub = hub
        self._store = store
        self._page = page
        self._dirty: set[str] = set()
        self._status_dirty: set[str] = set()
        self._event = asyncio.Event()
        self._log = structlog.get_logger("bridge.feed").bind(upstream=store.upstream)

    def wake(self, session_id: str) -> None:
        if self._hub.has_subscribers(session_id):
            self._dirty.add(session_id)
            self._event.set()

    def committed(self, session_id: str, max_seq: int) -> None:
        """A batch of the session committed up to `max_seq` (non-blocking; safe to call from ingest)."""
        published = self._hub.published_seq(session_id)
        if published is not None and max_seq > published:
            self.wake(session_id)

    def wake_all(self) -> None:
        """Notifications may have been missed (LISTEN reconnect): read every subscribed session, its events
        and its status."""
        for sid in self._hub.sessions():
            self.wake(sid)
            self._status_dirty.add(sid)
        self._event.set()

    def status(self, notice: StatusNotice) -> None:
        """A `bridge_status` notification (from any process, this one included). `erased` ends the session's
        subscriptions with a final frame (bridge.store.lifecycle.erase)."""
        if notice.status == "erased":
            self._hub.erased(notice.session_id)
            return
        self._hub.publish_status(notice.session_id, notice.status, notice.reason, notice.version)

    async def run(self) -> None:
        backoff = Backoff(0.1, 5.0)
        while True:
            await self._event.wait()
            self._event.clear()
            await self._read_woken(backoff)
            await self._drain(self._status_dirty, self._refresh_status, "feed_status_read_failed", backoff)

    async def _drain(self, dirty: set[str], read: Callable[[str], Awaitable[None]], failed: str,
                     backoff: Backoff) -> None:
        """Read every session marked in `dirty`; one that fails (database away) stays marked and is retried."""
        todo = sorted(dirty)
        dirty.clear()
        for sid in todo:
            try:
                await read(sid)
                backoff.reset()
            except Exception as e:
                self._log.warning(failed, session_id=sid, error=f"{type(e).__name__}: {e}")
                dirty.add(sid)
                await asyncio.sleep(backoff.next_delay())
                self._event.set()

    async def _read_woken(self, backoff: Backoff) -> None:
        """Every woken session's new events, `BATCH` sessions per read (bridge.store.reads.batch); a session
        that got a full page, or whose read failed (database away), stays woken."""
        todo = sorted(self._dirty)
        self._dirty.clear()
        for i in range(0, len(todo), BATCH):
            wanted = [(sid, top) for sid in todo[i:i + BATCH] if (top := self._hub.published_seq(sid)) is not None]
            try:
                found = await self._store.frames_after_many(wanted, self._page)
                backoff.reset()
            except Exception as e:
                self._log.warning("feed_read_failed", sessions=len(wanted), error=f"{type(e).__name__}: {e}")
                self._dirty.update(sid for sid, _ in wanted)
                await asyncio.sleep(backoff.next_delay())
                self._event.set()
                continue
            metrics.FEED_READS.inc()
            for (sid, _top), rows in zip(wanted, found, strict=True):
                self._hub.publish_durable(sid, replay_frames(sid, rows))
                if len(rows) >= self._page:
                    self.wake(sid)  # more than a page committed: read on from what was just published

    async def _refresh_status(self, session_id: str) -> None:
        if not self._hub.has_subscribers(session_id):
            return
        head = await self._store.head(session_id)
        if head is not None:
            self._hub.publish_status(session_id, head.status, head.status_reason, head.status_version)
        elif await self._store.erased(session_id):  # erased while this process's LISTEN was away
            self._hub.erased(session_id)


class CommitListener:
    """One raw asyncpg connection doing `LISTEN bridge_events`, reconnecting with backoff.

    After every (re)connect `on_connected` runs: notifications sent while we were away are lost, so the
    feed re-reads every subscribed session then."""

    def __init__(self, dsn: str, upstream: str, on_notice: Callable[[str, int], None],
                 on_connected: Callable[[], None], *, check_interval_s: float = 30.0,
                 on_status: Callable[[StatusNotice], None] | None = None,
                 on_reconnected: Callable[[], None] | None = None,
                 on_command: Callable[[CommandNotice], None] | None = None) -> None:
        self._dsn = dsn
        self._upstream = upstream
        self._on_notice = on_notice
        self._on_status = on_status
        self.on_command = on_command  # prompt rows' states (the legacy queue)
        self._on_connected = on_connected
        # Every connect but the first: the database was away (restarted, or another server after a failover).
        self._on_reconnected = on_reconnected
        self._connects = 0
        self._check_interval_s = check_interval_s
        self.connected = asyncio.Event()
        self._log = structlog.get_logger("bridge.listen").bind(upstream=upstream)

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        notice = parse_notice(payload)
        if notice is not None and notice.upstream == self._upstream:
            self._on_notice(notice.session_id, notice.max_seq)

    def _status_notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        notice = parse_status_notice(payload)
        if notice is not None and notice.upstream == self._upstream and self._on_status is not None:
            self._on_status(notice)

    def _command_notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        notice = parse_command_notice(payload)
        if notice is not None and notice.upstream == self._upstream and self.on_command is not None:
            self.on_command(notice)

    async def run(self) -> None:
        backoff = Backoff(0.2, 5.0)
        while True:
            try:
                await self._listen_once()
                backoff.reset()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as e:
                self._log.warning("listen_connection_lost", error=f"{type(e).__name__}: {e}")
            finally:
                self.connected.clear()
            metrics.NOTIFY_RECONNECTS.inc()
            await asyncio.sleep(backoff.next_delay())

    async def _listen_once(self) -> None:
        conn = await asyncpg.connect(self._dsn, timeout=10,
                                     server_settings={"application_name": "opencode-bridge-listen"})
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _c: lost.set())
            await conn.add_listener(NOTIFY_CHANNEL, self._notified)
            if self._on_status is not None:
                await conn.add_listener(STATUS_CHANNEL, self._status_notified)
            await conn.add_listener(COMMAND_CHANNEL, self._command_notified)
            self.connected.set()
            self._log.info("listen_connected", channel=NOTIFY_CHANNEL)
            self._on_connected()
            self._connects += 1
            if self._connects > 1 and self._on_reconnected is not None:
                self._on_reconnected()
            while not lost.is_set():
                try:
                    await asyncio.wait_for(lost.wait(), self._check_interval_s)
                except TimeoutError:
                    # A half-open TCP connection never terminates by itself: probe it.
                    await conn.fetchval("SELECT 1", timeout=10)
            self._log.warning("listen_connection_lost", error="connection terminated (server restart or admin)")
        finally:
            if not conn.is_closed():
                conn.terminate()
