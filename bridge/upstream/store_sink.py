"""The follower's EventSink on the store, bound to one session and the lease epoch it claimed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bridge import metrics
from bridge.events import ChatEvent
from bridge.store.events_store import EventStore


class StoreSink:
    def __init__(self, store: EventStore, session_id: str, epoch: int) -> None:
        self._store = store
        self._session_id = session_id
        self._epoch = epoch

    async def write(self, events: Sequence[ChatEvent], received_at: datetime) -> int:
        # A fenced-off write raises bridge.errors.LeaseLost, which the follower lets through.
        result = await self._store.write_batch(self._session_id, self._epoch, events, received_at)
        if result.duplicates:
            metrics.EVENTS_DUPLICATE.inc(result.duplicates)
        if result.rejected:
            metrics.REJECTS.labels(reason="conflicting_duplicate").inc(result.rejected)
        return result.cursor_seq

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None = None) -> None:
        await self._store.reject_frame(self._session_id, reason, raw, received_at, seq)
