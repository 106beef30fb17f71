"""Catch-up reads shared between the subscribers of one session (docs/websocket.md §3, "Shared reads").

A subscribe reads the session's head, pages of stored events after its `after`, and the session's
pending requests. When many clients subscribe to one session at once (a reconnect storm), one read of
each serves them all: subscribers of the same session join a **gathering** read — the head, the
requests, or a page whose `after` lies in the same window of `page // 2` seqs (the page is read from the
lowest `after` that joined; each subscriber skips what it already has, as it always did). The read waits
for a turn in the fair queue (bridge.fanout.read_queue); the first joiner whose turn comes starts it, the
others' places are given back, and its result (page frames built once) goes to every joiner.

**The invariant that keeps replay-then-live exact**: a read serves only subscriptions that were
registered with the hub *before it started*. A read never takes a joiner once started (a later
subscriber gathers the next one), so every row committed after a joiner registered is either in the
read or held for the joiner by the hub (`Subscription.pending`) — exactly as with a read of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy.exc import TimeoutError as PoolTimeout

from bridge.fanout import metrics
from bridge.fanout.protocol import replay_frames
from bridge.fanout.read_queue import ReadQueue, Ticket
from bridge.store.codecs import SessionRow
from bridge.store.fanout_store import FanoutStore
from bridge.store.pending import StoredRequest

T = TypeVar("T")
POOL_ATTEMPTS = 3  # an admitted read that finds the pool taken by other readers (audit API) runs again


@dataclass(frozen=True)
class Page:
    frames: list[tuple[int, str]]  # (seq, event frame), seq > the read's `after`, in seq order
    full: bool  # the read returned `limit` rows: more may follow


@dataclass(frozen=True)
class Requests:
    permissions: list[dict[str, Any]]  # pending permission envelopes
    questions: list[StoredRequest]


@dataclass
class _Read(Generic[T]):
    key: tuple[str, str, int]
    result: asyncio.Future[T]
    after: int = -1  # pages: the lowest `after` that joined
    started: bool = False
    joined: int = 0  # subscribers waiting on it
    tickets: list[Ticket] = field(default_factory=list)


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()  # retrieved: nobody may be left to await a failed read


class SharedReads:
    def __init__(self, store: FanoutStore, queue: ReadQueue, page: int) -> None:
        self._store = store
        self.queue = queue
        self.page_size = page
        self._window = max(1, page // 2)
        self._gathering: dict[tuple[str, str, int], _Read[Any]] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def head(self, owner: str, session_id: str) -> SessionRow | None:
        return await self._shared(owner, ("head", session_id, 0), lambda _r: self._store.head(session_id))

    async def page(self, owner: str, session_id: str, after: int) -> Page:
        """The stored events with seq > (at most) `after`: frames of one read shared with nearby subscribers."""
        key = ("page", session_id, (after + 1) // self._window)
        return await self._shared(owner, key, lambda r: self._page(session_id, r.after), after)

    async def requests(self, owner: str, session_id: str) -> Requests:
        return await self._shared(owner, ("requests", session_id, 0), lambda _r: self._requests(session_id))

    async def _page(self, session_id: str, after: int) -> Page:
        rows = await self._store.replay_frames_after(session_id, after, self.page_size)
        return Page(replay_frames(session_id, rows), len(rows) >= self.page_size)

    async def _requests(self, session_id: str) -> Requests:
        return Requests(await self._store.pending_permissions(session_id),
                        await self._store.pending_store().questions(session_id))

    async def _shared(self, owner: str, key: tuple[str, str, int], read: Callable[[_Read[T]], Awaitable[T]],
                      after: int | None = None) -> T:
        found: _Read[T] | None = self._gathering.get(key)
        if found is None:
            r: _Read[T] = _Read(key, asyncio.get_running_loop().create_future())
            r.result.add_done_callback(_consume)
            if after is not None:
                r.after = after
            self._gathering[key] = r
        else:
            r = found
            metrics.SHARED_READ_HITS.labels(read=key[0]).inc()
            if after is not None:
                r.after = min(r.after, after)
        r.joined += 1
        try:
            if not r.started:
                ticket = await self.queue.enqueue(owner)  # ReadQueueFull: this subscriber is refused `busy`
                r.tickets.append(ticket)
                if r.started:
                    ticket.withdraw()  # started while this owner waited for room in its line
                await ticket.granted()
                if r.started:
                    ticket.withdraw()  # another joiner's turn came first: ours goes to the next in line
                else:
                    self._start(r, ticket, read)
            return await asyncio.shield(r.result)
        finally:
            r.joined -= 1
            if not r.started and r.joined == 0 and self._gathering.get(key) is r:
                del self._gathering[key]  # everyone left before it ran: nothing to read
                for t in r.tickets:
                    t.withdraw()

    def _start(self, r: _Read[T], ticket: Ticket, read: Callable[[_Read[T]], Awaitable[T]]) -> None:
        r.started = True
        if self._gathering.get(r.key) is r:
            del self._gathering[r.key]  # from now on, a new subscriber gathers the next read
        for t in r.tickets:
            if t is not ticket:
                t.withdraw()
        metrics.SHARED_READS.labels(read=r.key[0]).inc()
        task = asyncio.get_running_loop().create_task(self._run(r, ticket, read), name=f"ws-read:{r.key[0]}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, r: _Read[T], ticket: Ticket, read: Callable[[_Read[T]], Awaitable[T]]) -> None:
        """Runs as its own task: a joiner that goes away does not take the read from the others."""
        try:
            for attempt in range(1, POOL_ATTEMPTS + 1):
                try:
                    value = await read(r)
                    break
                except PoolTimeout:
                    if attempt == POOL_ATTEMPTS:
                        raise
                    metrics.READ_RETRIES.inc()
            r.result.set_result(value)
        except BaseException as e:
            if not r.result.done():
                r.result.set_exception(e if isinstance(e, Exception) else RuntimeError("read cancelled"))
            if not isinstance(e, Exception):
                raise
        finally:
            ticket.release()

    async def run_alone(self, owner: str, read: Callable[[], Awaitable[T]]) -> T:
        """A read nobody shares (a `sessions` page): the same queue, the same fairness."""
        ticket = await self.queue.enqueue(owner)
        try:
            await ticket.granted()
            return await read()
        finally:
            ticket.release()
