"""Group commit across sessions: the pending writes of many followers in one transaction (docs/mirror.md).

A follower's `write()` queues its batch and waits; the committer takes everything queued — bounded by
events and bytes — into one transaction (`EventStore.commit`, bridge.store.writes.transaction) and answers each waiter
after the COMMIT: its own result, or the lease-lost refusal of its session alone. There is no timer: a
group starts as soon as a slot is free, so a quiet session's write waits for at most the commit already
in flight, and under load the queue that builds up during one commit is the next group (the batch size
follows the load, like PostgreSQL's own WAL flush). Two groups may be in flight (two connections: one
fills while the other syncs); a session is never in two at once, so its batches commit in order.

Failures: a lost connection fails the whole group — every waiter gets the error and retries from its
stored cursor, nothing of the group was stored. Any other error (a batch PostgreSQL refuses) is retried
session by session, so one bad batch fails only its own follower.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError

from bridge import metrics
from bridge.store.writes.transaction import SessionWrite, WriteResult

Commit = Callable[[Sequence[SessionWrite]], Awaitable[list[WriteResult]]]

MAX_EVENTS = 4000
MAX_BYTES = 8 << 20
GROUPS_IN_FLIGHT = 2


@dataclass
class _Pending:
    write: SessionWrite
    done: asyncio.Future[WriteResult]
    size: int


class GroupCommitter:
    def __init__(
        self,
        commit: Commit,
        *,
        max_events: int = MAX_EVENTS,
        max_bytes: int = MAX_BYTES,
        groups_in_flight: int = GROUPS_IN_FLIGHT,
    ) -> None:
        self._commit = commit
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._slots = groups_in_flight
        self._queue: deque[_Pending] = deque()
        self._busy: set[str] = set()  # sessions of the groups in flight
        self._in_flight = 0
        self._changed = asyncio.Condition()

    async def submit(self, write: SessionWrite) -> WriteResult:
        """Queue one session's batch; returns after the transaction that holds it committed."""
        done: asyncio.Future[WriteResult] = asyncio.get_running_loop().create_future()
        size = sum(len(p.payload_text) for p in write.events)
        async with self._changed:
            self._queue.append(_Pending(write, done, size))
            metrics.GROUP_COMMIT_WAITING.inc()
            self._changed.notify_all()
        return await done

    async def run(self) -> None:
        """Start groups until cancelled; the commits in flight are owned here."""
        async with asyncio.TaskGroup() as tg:
            while True:
                async with self._changed:
                    await self._changed.wait_for(self._can_start)
                    group = self._take()
                    if not group:  # only writes whose followers stopped meanwhile
                        self._changed.notify_all()  # drain() may be waiting for the queue to empty
                        continue
                    self._in_flight += 1
                    self._busy.update(p.write.session_id for p in group)
                tg.create_task(self._commit_group(group))

    async def drain(self) -> None:
        """Wait until every queued write is committed (or failed) and nothing is in flight."""
        async with self._changed:
            await self._changed.wait_for(lambda: not self._queue and self._in_flight == 0)

    def _can_start(self) -> bool:
        return self._in_flight < self._slots and any(p.write.session_id not in self._busy for p in self._queue)

    def _take(self) -> list[_Pending]:
        group: list[_Pending] = []
        events = size = 0
        waiting: deque[_Pending] = deque()
        held: set[str] = set()  # sessions with a write held back: a later one must not overtake it
        queued = len(self._queue)
        while self._queue:
            p = self._queue.popleft()
            if p.done.cancelled():  # its follower stopped before the write was taken: nothing to answer
                continue
            sid = p.write.session_id
            n = len(p.write.events)
            full = group and (events + n > self._max_events or size + p.size > self._max_bytes)
            if sid in self._busy or sid in held or full:
                waiting.append(p)
                held.add(sid)
                continue
            group.append(p)
            events += n
            size += p.size
        metrics.GROUP_COMMIT_WAITING.dec(queued - len(waiting))  # taken, or dropped as cancelled
        self._queue = waiting
        return group

    async def _commit_group(self, group: list[_Pending]) -> None:
        try:
            await self._resolve(group)
        finally:
            async with self._changed:
                self._in_flight -= 1
                self._busy.difference_update(p.write.session_id for p in group)
                self._changed.notify_all()

    async def _resolve(self, group: list[_Pending]) -> None:
        t0 = time.perf_counter()
        try:
            results = await self._commit([p.write for p in group])
        except Exception as e:
            sessions = {p.write.session_id for p in group}
            if len(sessions) == 1 or _connection_lost(e):
                for p in group:
                    _fail(p, e)
                return
            for sid in sessions:  # someone's batch was refused: find out whose, fail only that one
                await self._resolve([p for p in group if p.write.session_id == sid])
            return
        metrics.GROUP_WRITES.observe(len(group))
        metrics.GROUP_SECONDS.observe(time.perf_counter() - t0)
        for p, r in zip(group, results, strict=True):
            if not p.done.done():
                p.done.set_result(r)


def _connection_lost(e: Exception) -> bool:
    return isinstance(e, DBAPIError) and bool(e.connection_invalidated)


def _fail(p: _Pending, e: Exception) -> None:
    if not p.done.done():
        p.done.set_exception(e)
