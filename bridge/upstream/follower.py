"""What a durable follower promises its owner: how it ends (`FollowerExit`) and what it writes through
(`EventSink`, implemented on the store by bridge.upstream.store_sink.StoreSink). No I/O here."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from bridge.events import ChatEvent


class FollowerExit(enum.Enum):
    STOPPED = "stopped"  # asked to stop
    GONE = "gone"  # the session was deleted upstream (404)
    BAD_CURSOR = "bad_cursor"  # the upstream refuses our cursor (400): needs an operator
    LEASE_LOST = "lease_lost"  # another writer holds the session now
    STUCK = "stuck"  # the upstream keeps serving what cannot be stored: needs an operator


class EventSink(Protocol):
    async def write(self, events: Sequence[ChatEvent], received_at: datetime) -> int:
        """Store events and advance the cursor in one transaction; returns the stored cursor.
        Raises `bridge.errors.LeaseLost` when fenced off."""

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None = None) -> None:
        """Keep an unusable frame with its reason."""
