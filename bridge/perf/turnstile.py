"""How much ingest work one turn of the event loop runs (docs/mirror.md, "Bursts").

When a thousand followers' reads arrive together, asyncio runs every one of their steps in the same turn of
the loop: each parses and prepares its events before anything else runs — no database reply is read, no
group commit starts, no heartbeat or WebSocket frame goes out — for as long as all of that takes (half a
second for 1,000 sessions of 20 events here). The turnstile bounds it: a follower `enter()`s before the
CPU work of a read; within a slice of `slice_s` every entry passes, after it the rest queue in order and
are let through a batch per turn. The batch starts as what fitted in the first full slice and follows the
time batches really take (halved after one that overran the slice, one more after one that did not): reads
differ in cost (an SSE chunk, a page of 100 events). The batch woken in a turn is the next turn's slice.
Between those turns the loop reads the database's replies and starts the next group, so parsing and
committing overlap.

One turnstile for all the followers of a process, made by its owner and passed in (bridge.daemon →
FollowerSupervisor → WarmRegistry → every DurableFollower); nothing here does I/O.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

SLICE_S = 0.002


class Turnstile:
    def __init__(self, slice_s: float = SLICE_S, clock: Callable[[], float] = time.perf_counter) -> None:
        self._slice = slice_s
        self._clock = clock
        self._opened: float | None = None  # when the current slice began; None: none open
        self._passed = 0  # entries let through in the current slice
        self.per_turn = 1  # entries let through per turn while some wait
        self._woke_at: float | None = None  # when the last batch was woken (it runs in the next turn)
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._scheduled = False

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def enter(self) -> None:
        """Return at once within the current slice; otherwise after the entries queued before this one."""
        if not self._waiting:
            now = self._clock()
            if self._opened is None:
                self._opened, self._passed = now, 0
                self._schedule()  # the slice ends with this turn of the loop
            if now - self._opened <= self._slice:
                self._passed += 1
                return
            if self._woke_at is None:  # a full slice of fresh entries: the first estimate of a batch
                self.per_turn = max(1, self._passed)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)
        self._schedule()
        await waiter  # cancelled while waiting: the future is cancelled and skipped by _turn

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)

    def _turn(self) -> None:
        """Once per turn while a slice is open or entries wait. The batch woken last turn has run by now (it
        was ready before this callback): its time sets the next batch's size. Then the next batch is woken;
        it runs in the next turn and is that turn's slice."""
        self._scheduled = False
        now = self._clock()
        if self._woke_at is not None:
            took, self._woke_at = now - self._woke_at, None
            self.per_turn = max(1, self.per_turn // 2) if took > self._slice else self.per_turn + 1
        woken = 0
        while self._waiting and woken < self.per_turn:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                woken += 1
        if woken:
            self._woke_at = now
            self._opened, self._passed = now, woken
            self._schedule()
        else:  # nobody waits any more: the next entry opens a fresh slice
            self._opened, self._passed = None, 0
