"""What the fan-out takes from the live reader: deltas (ephemeral, straight to the hub) and permission
requests (live-only upstream, docs/upstream.md §4.4: stored in our own table first, so a page opened later
still sees a pending one, then pushed), of both runtimes alike: a legacy `message.part.delta` is the same
`delta:text` / `delta:reasoning` as a v2 `*.delta`, a legacy `permission.asked` / `.replied` the same
`permission:asked` / `:replied` as `permission.v2.*` (docs/legacy.md), recorded with the runtime that asked.

`/api/event` is lossy, so after every (re)connect `PermissionResync` asks upstream for the pending
requests of the sessions that have local subscribers: one never seen is recorded as asked, one still
pending here but no longer upstream was answered meanwhile and is recorded as replied `unknown`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import structlog

from bridge.errors import UpstreamError
from bridge.events import (
    ChatEvent,
    PermissionUpdate,
    is_delta,
    pending_request,
    permission_update,
    resolved_while_away,
)
from bridge.fanout.hub import Hub
from bridge.fanout.protocol import permission_message
from bridge.store.fanout_store import FanoutStore
from bridge.upstream.client import UpstreamClient

RESOLVED_NOTE = "answered while the bridge was disconnected from /api/event"


class LiveRelay:
    def __init__(self, hub: Hub, store: FanoutStore) -> None:
        self._hub = hub
        self._store = store
        self._log = structlog.get_logger("bridge.relay").bind(upstream=store.upstream)

    async def on_live_event(self, ev: ChatEvent) -> None:
        sid = ev.session_id
        if not sid:
            return
        if is_delta(ev.kind):
            self._hub.publish_delta(sid, ev)
            return
        update = permission_update(ev)
        if update is not None:
            await self.permission(update)

    async def permission(self, update: PermissionUpdate) -> None:
        """Store a permission request's new state, then push it to the session's subscribers."""
        sid, now = update.session_id, datetime.now(UTC)
        try:
            if update.replied:
                await self._store.permission_replied(sid, update.request_id, update.record, now, update.reply)
            else:
                await self._store.permission_asked(sid, update.request_id, update.record, now, update.action,
                                                   update.assistant_message_id, update.call_id, update.runtime)
        except Exception as e:  # still tell the live subscribers; only a later page would miss it
            self._log.error("permission_store_failed", session_id=sid, request_id=update.request_id,
                            error=f"{type(e).__name__}: {e}")
        self._hub.publish_state(sid, permission_message(sid, update))


class PermissionResync:
    """Re-syncs the pending permission requests of the subscribed sessions, once per `request()`.

    `request()` only sets a flag (the live reader is never blocked); `run()` is a task of the fan-out.
    Requests made while a pass runs coalesce into one more pass. Errors are logged, never raised."""

    def __init__(self, hub: Hub, store: FanoutStore, relay: LiveRelay, client: UpstreamClient) -> None:
        self._hub = hub
        self._store = store
        self._relay = relay
        self._client = client
        self._wanted = asyncio.Event()
        self.passes = 0  # completed passes (tests)
        self._log = structlog.get_logger("bridge.relay").bind(upstream=store.upstream)

    def request(self) -> None:
        self._wanted.set()

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            for sid in self._hub.sessions():
                try:
                    await self.sync(sid)
                except Exception as e:
                    self._log.error("permission_resync_failed", session_id=sid, error=f"{type(e).__name__}: {e}")
            self.passes += 1

    async def sync(self, sid: str) -> None:
        # Read our table before asking upstream: a request asked live after this read is not judged. Only
        # v2 requests: the per-session list upstream has no legacy ones (docs/upstream.md §16).
        stored = await self._store.permission_replies(sid, runtime="v2")
        try:
            pending = await self._client.pending_permissions(sid)
        except UpstreamError as e:
            self._log.warning("permission_resync_upstream_failed", session_id=sid, error=str(e))
            return
        upstream_ids: set[str] = set()
        for item in pending:
            update = pending_request(sid, item)
            if update is None:
                continue
            upstream_ids.add(update.request_id)
            if update.request_id not in stored:
                await self._emit(update)
        for rid, reply in stored.items():
            if reply is None and rid not in upstream_ids:
                await self._emit(resolved_while_away(sid, rid, RESOLVED_NOTE))

    async def _emit(self, update: PermissionUpdate) -> None:
        self._log.info("permission_resynced", session_id=update.session_id,
                       state="replied" if update.replied else "asked", request_id=update.request_id)
        await self._relay.permission(update)
