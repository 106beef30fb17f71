"""The bounded outgoing queue of one WebSocket client (pure asyncio, no sockets).

Bounded in messages and bytes. Ephemeral messages (deltas) are only queued below half of the limits,
so a client that falls behind loses deltas first; a durable message is never dropped: if it does not
fit even after evicting every queued delta, the queue *overflows* — it is emptied and closed, and the
connection is then closed with a reconnectable code (the client resumes from its last seq).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class QueueLimits:
    max_messages: int = 2000
    max_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_messages < 2 or self.max_bytes < 2:
            raise ValueError("queue limits must be at least 2")


class ClientQueue:
    def __init__(self, limits: QueueLimits) -> None:
        self.limits = limits
        # (frame, durable, monotonic time a delta was queued, (session, seq) of a durable event)
        self._items: deque[tuple[str, bool, float, tuple[str, int] | None]] = deque()
        self._bytes = 0
        self._ready = asyncio.Event()  # something to send, or closed
        self._room = asyncio.Event()  # below the soft limits (replay backpressure)
        self._room.set()
        self.closed = False
        self.overflowed = False
        self.dropped_ephemeral = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        return self._bytes

    def _below_soft(self, extra: int = 0) -> bool:
        lim = self.limits
        return len(self._items) < lim.max_messages // 2 and self._bytes + extra <= lim.max_bytes // 2

    def _fits_hard(self, size: int) -> bool:
        lim = self.limits
        return len(self._items) < lim.max_messages and self._bytes + size <= lim.max_bytes

    def _push(self, frame: str, durable: bool, stamp: float, key: tuple[str, int] | None = None) -> None:
        self._items.append((frame, durable, stamp, key))
        self._bytes += len(frame)
        self._ready.set()
        if not self._below_soft():
            self._room.clear()

    def offer_ephemeral(self, frame: str, stamp: float = 0.0) -> bool:
        """Queue a delta if the client is keeping up; otherwise drop it (returns False)."""
        if self.closed:
            return False
        if not self._below_soft(len(frame)):
            self.dropped_ephemeral += 1
            return False
        self._push(frame, False, stamp)
        return True

    def offer_durable(self, frame: str, key: tuple[str, int] | None = None) -> bool:
        """Queue a durable message; False means the queue overflowed and is now closed."""
        if self.closed:
            return False
        size = len(frame)
        if not self._fits_hard(size):
            self._evict_ephemeral()
        if not self._fits_hard(size):
            self.overflowed = True
            self.close()
            return False
        self._push(frame, True, 0.0, key)
        return True

    def offer_durable_run(self, session_id: str, frames: Sequence[tuple[int, str]], start: int, max_frame: int) -> int:
        """Queue `frames[start:]` — `(seq, frame)` of one session, durable — in order while the queue is below its
        soft limits and each frame has at most `max_frame` characters; the index of the first one not queued.

        A replay's page: each frame would have waited for room (`wait_room`) and then been offered alone
        (`offer_durable`), which fits below the soft limits whenever the frame is at most half the byte limit;
        here the run is queued in one call, without a check and a wake-up per frame."""
        if self.closed:
            return start
        items, lim = self._items, self.limits
        soft_n, soft_bytes = lim.max_messages // 2, lim.max_bytes // 2
        n, size, i, end = len(items), self._bytes, start, len(frames)
        while i < end and n < soft_n and size <= soft_bytes:
            seq, frame = frames[i]
            chars = len(frame)
            if chars > max_frame:
                break
            items.append((frame, True, 0.0, (session_id, seq)))
            size += chars
            n += 1
            i += 1
        if i > start:
            self._bytes = size
            self._ready.set()
            if not self._below_soft():
                self._room.clear()
        return i

    def _evict_ephemeral(self) -> None:
        kept = deque(item for item in self._items if item[1])
        self.dropped_ephemeral += len(self._items) - len(kept)
        self._items = kept
        self._bytes = sum(len(item[0]) for item in kept)

    def close(self) -> None:
        self.closed = True
        self._items.clear()
        self._bytes = 0
        self._ready.set()
        self._room.set()

    async def get(self) -> tuple[str, float, tuple[str, int] | None] | None:
        """The next frame, the monotonic time a delta was queued (else 0) and the (session, seq) of a
        durable event (else None); None once closed."""
        while not self._items:
            if self.closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        frame, _, stamp, key = self._items.popleft()
        self._bytes -= len(frame)
        if self._below_soft():
            self._room.set()
        return frame, stamp, key

    async def get_batch(self, max_bytes: int) -> list[tuple[str, float, tuple[str, int] | None]] | None:
        """Every frame queued now, in order, up to `max_bytes` (at least one frame, however large), as
        `get` returns them; waits while the queue is empty, None once closed. The transport writes a
        batch to the socket in one write (bridge.http.ws_send): what has left the queue but not the
        socket's buffer is at most one batch, so a slow client overflows its queue as it did frame by frame."""
        while not self._items:
            if self.closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        items = self._items
        batch: list[tuple[str, float, tuple[str, int] | None]] = []
        size = 0
        while items and (not batch or size + len(items[0][0]) <= max_bytes):
            frame, _, stamp, key = items.popleft()
            size += len(frame)
            batch.append((frame, stamp, key))
        self._bytes -= size
        if self._below_soft():
            self._room.set()
        return batch

    @property
    def has_room(self) -> bool:
        """Below the soft limits (or closed): `wait_room` would return at once."""
        return self._room.is_set()

    async def wait_room(self) -> None:
        """Wait until the queue is below its soft limits (or closed): replay never overflows a client."""
        await self._room.wait()
