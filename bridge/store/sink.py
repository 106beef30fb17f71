"""The follower's `EventSink` (bridge.upstream.durable) over the store: one session, one lease epoch.

`write()` goes through the store's group committer when one is running (`EventStore.group_commit()`), else
straight to its own transaction; either way it returns the cursor stored by the COMMIT that holds the batch,
and raises the follower's lease-lost error when the session's epoch moved on (nothing of it stored).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from bridge import metrics
from bridge.events import ChatEvent
from bridge.store.write import Fenced
from bridge.upstream.durable import LeaseLostError

if TYPE_CHECKING:
    from bridge.store.events_store import EventStore


class StoreSink:
    def __init__(self, store: EventStore, session_id: str, epoch: int) -> None:
        self._store = store
        self._session_id = session_id
        self._epoch = epoch

    async def write(self, events: Sequence[ChatEvent], received_at: datetime) -> int:
        write = self._store.prepare(self._session_id, self._epoch, events, received_at)
        committer = self._store.committer
        if committer is not None:
            result = await committer.submit(write)
        else:
            (result,) = await self._store.commit([write])
        if isinstance(result, Fenced):
            from bridge.store.events_store import lease_lost

            raise LeaseLostError(str(lease_lost(self._session_id, result)))
        if result.duplicates:
            metrics.EVENTS_DUPLICATE.inc(result.duplicates)
        if result.rejected:
            metrics.REJECTS.labels(reason="conflicting_duplicate").inc(result.rejected)
        return result.cursor_seq

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None = None) -> None:
        await self._store.reject_frame(self._session_id, reason, raw, received_at, seq)
