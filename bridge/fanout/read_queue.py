"""Fair admission of the WebSocket's database reads (docs/websocket.md §5, docs/security.md "Floods").

The read pool is small and fixed (bridge.store.db.make_read_engine): a burst of subscribes that each
asked it for a connection would wait on the pool and fail on its acquire timeout. Reads wait here instead,
for one of `slots` turns (fewer than the pool has connections, so the live feed always finds one):

- **fair**: waiting reads are grouped by owner (a token's `jti`: every connection of one client) and
  owners take turns, round-robin; within an owner, first come first served. A client with a hundred
  reads waiting gets one turn in N, like a client with one;
- **bounded per owner**: an owner with `per_owner` reads waiting waits before it may queue another (its
  connections' readers stop: TCP backpressure), so a flooding client fills only its own share;
- **bounded in all**: with `max_waiting` reads waiting, a new one is refused with `ReadQueueFull` (the
  `busy` error with a `retry_after`), the only refusal, and never on a timeout.

A `Ticket` is one place in the queue: `await ticket.granted()` for the turn, then `release()` once the
read is done, or `withdraw()` to give the place (or the turn) back unused.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from bridge.fanout import metrics
from bridge.fanout.protocol import ERR_BUSY, error_message

DEFAULT_MAX_WAITING = 20_000
DEFAULT_PER_OWNER = 64


class ReadQueueFull(Exception):
    def __init__(self, waiting: int, retry_after_s: float) -> None:
        super().__init__(f"{waiting} reads are waiting: retry in {retry_after_s:g} s")
        self.retry_after_s = retry_after_s


def busy_message(retry_after_s: float, ref: object = None, session: str | None = None) -> dict[str, Any]:
    """The refusal of a subscribe or `sessions` when the queue of reads is full (never a pool timeout)."""
    return error_message(ERR_BUSY, f"the bridge is busy serving other subscribers: retry in {retry_after_s:g} s",
                         ref, session, retry_after=retry_after_s)


class Ticket:
    """One place in the queue; `granted()` returns when its turn came (`has_turn`) or it was withdrawn."""

    def __init__(self, queue: ReadQueue, owner: str, at: float) -> None:
        self._queue = queue
        self.owner = owner
        self.at = at
        self.granted_at = at
        self._wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.has_turn = False
        self.done = False  # released or withdrawn: nothing more to give back

    async def granted(self) -> None:
        if self._wake.done():
            return
        try:
            await asyncio.shield(self._wake)
        except asyncio.CancelledError:
            self.withdraw()
            raise

    def release(self) -> None:
        """The read that had the turn is over: the turn goes to the next owner in line."""
        self.withdraw()

    def withdraw(self) -> None:
        """Leave the queue unused (someone else's read serves this one), or give an unused turn back."""
        if not self.done:
            self.done = True
            self._queue._finished(self)
            if not self._wake.done():
                self._wake.set_result(None)

    def _give_turn(self) -> None:
        self.has_turn = True
        self._wake.set_result(None)


class ReadQueue:
    def __init__(self, slots: int, *, max_waiting: int = DEFAULT_MAX_WAITING, per_owner: int = DEFAULT_PER_OWNER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.slots = max(1, slots)
        self.max_waiting = max_waiting
        self.per_owner = max(1, per_owner)
        self._clock = clock
        self._busy = 0
        self._lines: dict[str, deque[Ticket]] = {}  # per owner, its waiting tickets in order
        self._turns: deque[str] = deque()  # owners with waiting tickets, in the order they get a turn
        self._waiting = 0
        self._room = asyncio.Condition()  # an owner at `per_owner` waits here for its line to shorten
        self._throttled = 0  # owners waiting in `_room`
        self._read_s = 0.005  # moving average of a read's time, for `retry_after`

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def busy(self) -> int:
        return self._busy

    async def enqueue(self, owner: str) -> Ticket:
        """A place in line for `owner` (granted at once when a turn is free and nobody waits); waits while
        the owner already has `per_owner` reads waiting; ReadQueueFull when the queue is full."""
        line = self._lines.get(owner)
        if line is not None and len(line) >= self.per_owner:
            metrics.READ_QUEUE_THROTTLED.inc()
            self._throttled += 1
            try:
                async with self._room:
                    await self._room.wait_for(lambda: len(self._lines.get(owner, ())) < self.per_owner)
            finally:
                self._throttled -= 1
        if self._waiting >= self.max_waiting:
            retry = round(max(1.0, self._waiting * self._read_s / self.slots), 1)
            metrics.WS_REFUSED.labels(reason="busy").inc()
            raise ReadQueueFull(self._waiting, retry)
        ticket = Ticket(self, owner, self._clock())
        if self._busy < self.slots and not self._turns:
            self._grant(ticket)
            return ticket
        line = self._lines.get(owner)
        if line is None:
            line = self._lines[owner] = deque()
            self._turns.append(owner)
        line.append(ticket)
        self._waiting += 1
        metrics.READ_QUEUE_DEPTH.set(self._waiting)
        return ticket

    def _grant(self, ticket: Ticket) -> None:
        self._busy += 1
        ticket.granted_at = self._clock()
        metrics.READ_QUEUE_WAIT_SECONDS.observe(self._clock() - ticket.at)
        ticket._give_turn()

    def _finished(self, ticket: Ticket) -> None:
        if ticket.has_turn:
            self._busy -= 1
            took = self._clock() - ticket.granted_at
            self._read_s = 0.9 * self._read_s + 0.1 * max(took, 0.0001)
        else:
            line = self._lines.get(ticket.owner)
            if line is not None and ticket in line:
                line.remove(ticket)
                self._waiting -= 1
                if not line:
                    del self._lines[ticket.owner]
                    self._turns.remove(ticket.owner)
                self._wake_owner()
        self._next()

    def _next(self) -> None:
        while self._busy < self.slots and self._turns:
            owner = self._turns.popleft()
            line = self._lines[owner]
            ticket = line.popleft()
            self._waiting -= 1
            if line:
                self._turns.append(owner)  # its next read waits for every other owner's turn
            else:
                del self._lines[owner]
            self._grant(ticket)
            self._wake_owner()
        metrics.READ_QUEUE_DEPTH.set(self._waiting)

    def _wake_owner(self) -> None:
        if self._throttled:  # only an owner at its bound waits there: rare, cheap to skip otherwise
            asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._room:
            self._room.notify_all()
