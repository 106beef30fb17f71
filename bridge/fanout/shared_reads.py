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
from bridge.store.commands_pending import StoredRequest
from bridge.store.reads import FanoutStore

T = TypeVar("T")
POOL_ATTEMPTS = 3  # an admitted read that finds the pool taken by other readers (audit API) runs again
HEADS_PER_READ = 200  # sessions' heads (or pending requests) read by one statement
PAGES_PER_READ = 20  # (session, after) pages read by one statement: at most 20 pages of rows


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
    """One read gathering joiners: `wanted` maps what each asks (an entry) to the `after` to read from."""

    key: tuple[str, str]
    result: asyncio.Future[dict[Any, T]]
    wanted: dict[Any, int] = field(default_factory=dict)
    started: bool = False
    joined: int = 0  # subscribers waiting on it
    tickets: list[Ticket] = field(default_factory=list)


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()  # retrieved: nobody may be left to await a failed read


ReadMany = Callable[["_Read[T]"], Awaitable[dict[Any, T]]]


class SharedReads:
    def __init__(self, store: FanoutStore, queue: ReadQueue, page: int, *, heads_per_read: int = HEADS_PER_READ,
                 pages_per_read: int = PAGES_PER_READ) -> None:
        self._store = store
        self.queue = queue
        self.page_size = page
        self._window = max(1, page // 2)
        self._heads_per_read = heads_per_read
        self._pages_per_read = pages_per_read
        self._gathering: dict[tuple[str, str], _Read[Any]] = {}  # per kind, the read taking new entries
        self._open: dict[tuple[tuple[str, str], Any], _Read[Any]] = {}  # (kind, entry) → its read not started yet
        self._running: set[asyncio.Task[None]] = set()

    async def head(self, owner: str, session_id: str) -> SessionRow | None:
        """The session's head, read with the heads of the other sessions gathered (None: not stored)."""
        found: SessionRow | None = await self._shared(owner, ("head", ""), session_id, 0, self._heads,
                                                      self._heads_per_read)
        return found

    async def page(self, owner: str, session_id: str, after: int) -> Page:
        """The stored events with seq > (at most) `after`: one read for the nearby subscribers of the session
        and for the other sessions gathered (a standby reads per session: `replay_frames_after`)."""
        entry = (session_id, (after + 1) // self._window)
        if self._store.has_standby:
            return await self._shared(owner, ("page", session_id), entry, after, self._pages_alone, 1)
        return await self._shared(owner, ("page", ""), entry, after, self._pages, self._pages_per_read)

    async def requests(self, owner: str, session_id: str) -> Requests:
        return await self._shared(owner, ("requests", ""), session_id, 0, self._requests, self._heads_per_read)

    async def _heads(self, r: _Read[SessionRow | None]) -> dict[Any, SessionRow | None]:
        found = await self._store.heads(list(r.wanted))
        return {sid: found.get(sid) for sid in r.wanted}

    async def _pages(self, r: _Read[Page]) -> dict[Any, Page]:
        entries = list(r.wanted.items())
        found = await self._store.frames_after_many([(sid, after) for (sid, _w), after in entries], self.page_size)
        return {entry: Page(replay_frames(entry[0], rows), len(rows) >= self.page_size)
                for (entry, _after), rows in zip(entries, found, strict=True)}

    async def _pages_alone(self, r: _Read[Page]) -> dict[Any, Page]:
        out: dict[Any, Page] = {}
        for (sid, w), after in r.wanted.items():
            rows = await self._store.replay_frames_after(sid, after, self.page_size)
            out[(sid, w)] = Page(replay_frames(sid, rows), len(rows) >= self.page_size)
        return out

    async def _requests(self, r: _Read[Requests]) -> dict[Any, Requests]:
        found = await self._store.requests(list(r.wanted))
        return {sid: Requests(*found[sid]) for sid in r.wanted}

    async def _shared(self, owner: str, key: tuple[str, str], entry: Any, after: int, read: ReadMany[T],
                      most: int) -> T:
        """Join the gathering read of `key` (or start gathering one) for `entry`, wait for it, and return
        its value for `entry`. A read takes at most `most` entries; a full one goes on waiting for its turn
        while the next one gathers."""
        found: _Read[T] | None = self._open.get((key, entry))
        if found is not None:  # a read not started yet already has this entry: one read serves both
            r = found
            metrics.SHARED_READ_HITS.labels(read=key[0]).inc()
        else:
            gathering: _Read[T] | None = self._gathering.get(key)
            if gathering is None or len(gathering.wanted) >= most:  # a full one runs for those it has
                gathering = _Read(key, asyncio.get_running_loop().create_future())
                gathering.result.add_done_callback(_consume)
                self._gathering[key] = gathering
            r = gathering
            self._open[(key, entry)] = r
        r.wanted[entry] = min(r.wanted.get(entry, after), after)
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
            return (await asyncio.shield(r.result))[entry]
        finally:
            r.joined -= 1
            if not r.started and r.joined == 0:  # everyone left before it ran: nothing to read
                self._close(r)
                for t in r.tickets:
                    t.withdraw()

    def _close(self, r: _Read[Any]) -> None:
        """No joiner more: the read is started or abandoned."""
        if self._gathering.get(r.key) is r:
            del self._gathering[r.key]
        for entry in r.wanted:
            if self._open.get((r.key, entry)) is r:
                del self._open[(r.key, entry)]

    def _start(self, r: _Read[T], ticket: Ticket, read: ReadMany[T]) -> None:
        r.started = True
        self._close(r)  # from now on, a new subscriber gathers the next read
        for t in r.tickets:
            if t is not ticket:
                t.withdraw()
        metrics.SHARED_READS.labels(read=r.key[0]).inc()
        task = asyncio.get_running_loop().create_task(self._run(r, ticket, read), name=f"ws-read:{r.key[0]}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, r: _Read[T], ticket: Ticket, read: ReadMany[T]) -> None:
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
