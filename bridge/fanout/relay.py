"""What the fan-out takes from the global `/api/event` reader: deltas (ephemeral, straight to the hub)
and permission requests (live-only upstream, PROTOCOL.md §4.4: stored in our own table first, so a page
opened later still sees a pending one, then pushed)."""

from __future__ import annotations

from datetime import UTC, datetime

import structlog

from bridge.events import ChatEvent, is_delta
from bridge.fanout.hub import Hub
from bridge.fanout.protocol import permission_message
from bridge.store.fanout import FanoutStore


class LiveRelay:
    def __init__(self, hub: Hub, store: FanoutStore) -> None:
        self._hub = hub
        self._store = store
        self._log = structlog.get_logger("bridge.relay").bind(upstream=store.upstream)

    async def on_live_event(self, ev: ChatEvent) -> None:
        sid = ev.envelope.session_id
        if not sid:
            return
        if is_delta(ev.kind):
            self._hub.publish_delta(sid, ev)
        elif ev.kind in ("permission:asked", "permission:replied"):
            await self._permission(sid, ev)

    async def _permission(self, sid: str, ev: ChatEvent) -> None:
        if ev.request_id is None:
            return
        now = datetime.now(UTC)
        try:
            if ev.kind == "permission:asked":
                await self._store.permission_asked(sid, ev.request_id, ev.envelope.raw, now, ev.action,
                                                   ev.assistant_message_id, ev.call_id)
            else:
                await self._store.permission_replied(sid, ev.request_id, ev.envelope.raw, now, ev.reply)
        except Exception as e:  # still tell the live subscribers; only a later page would miss it
            self._log.error("permission_store_failed", session_id=sid, request_id=ev.request_id,
                            error=f"{type(e).__name__}: {e}")
        self._hub.publish_state(sid, permission_message(sid, ev.envelope.raw))
