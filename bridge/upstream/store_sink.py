"""The follower's EventSink on the store, bound to one session and the lease epoch it claimed.

Every write carries the cursor this sink believes stored (the claim's, then each write's): a database that
holds less (commits lost in a failover) refuses it with `CursorBehind`, and the follower re-reads from the
stored cursor (docs/scaling.md, "Failover")."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bridge import metrics
from bridge.errors import CursorBehind
from bridge.events import ChatEvent
from bridge.store.writes import EventStore


class StoreSink:
    def __init__(self, store: EventStore, session_id: str, epoch: int, cursor: int | None = None) -> None:
        self._store = store
        self._session_id = session_id
        self._epoch = epoch
        self._believed = cursor  # None: not checked

    async def write(self, events: Sequence[ChatEvent], received_at: datetime) -> int:
        # A fenced-off write raises bridge.errors.LeaseLost, which the follower lets through.
        try:
            result = await self._store.write_batch(self._session_id, self._epoch, events, received_at,
                                                   expected_cursor=self._believed)
        except CursorBehind as e:
            self._believed = e.stored
            raise
        self._believed = result.cursor_seq
        if result.duplicates:
            metrics.EVENTS_DUPLICATE.inc(result.duplicates)
        if result.rejected:
            metrics.REJECTS.labels(reason="conflicting_duplicate").inc(result.rejected)
        return result.cursor_seq

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None = None) -> None:
        await self._store.reject_frame(self._session_id, reason, raw, received_at, seq)

    async def stored_cursor(self) -> int | None:
        """What the database holds now (None: the session row is gone); the believed cursor follows it."""
        stored = await self._store.stored_cursor(self._session_id)
        if stored is not None and self._believed is not None:
            self._believed = min(self._believed, stored)
        return stored
