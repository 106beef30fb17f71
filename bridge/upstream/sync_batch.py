"""One shared sync-log reader per upstream: many sessions' repairs in one `POST /sync/history`
(docs/mirror.md "Sync-log repair, batched"; docs/upstream.md §14).

`fetch(session_id, after)` is what one session's repair awaits (its `SessionIngest` holds its lock, owns
its cursor and commits what it gets, exactly as before). The batcher collects the sessions asking within
`window_s` (longer while more keep coming, up to `gather_max_s`), and whenever a sync slot is free plans
the next call from everything waiting (bridge.upstream.sync_plan: at most `max_sessions`, a request body
within `max_request_bytes`), posts it, and hands each session the items of its own aggregate. While all
slots are busy the queue grows, so a warm-up of 10,000 sessions becomes a few large calls rather than
10,000 small ones.

Faults stay per call: an answer over the client's body bound is asked again in two halves (a single
session's is that session's `BodyTooLarge`, as before). A call the upstream could not answer (connection
lost, 5xx: `UpstreamUnavailable`) puts its sessions back in the queue after a shared capped backoff, so
they are asked together again (at most `retries` times; then, and for any other failure, every session of
the call gets the error and its own retry — the repair inbox's `retry_s`, the follower's reconnect backoff —
asks again). A session
whose items are bad rejects them itself; the others of the call are not affected. A caller that is
cancelled while waiting is left out (or its part of the answer is dropped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from bridge import metrics
from bridge.backoff import Backoff
from bridge.errors import BodyTooLarge, InvalidRequest, UpstreamUnavailable
from bridge.upstream.sync_answer import SyncAnswer
from bridge.upstream.sync_plan import MAX_NAMED, ItemPace, Wanted, body, halves, plan_call, split_answer

Post = Callable[[dict[str, int], Mapping[str, int]], Awaitable[SyncAnswer]]

# The first repair after a quiet moment waits `WINDOW_S` for others to join it, and longer while more keep
# coming (a warm-up: every claimed session's catch-up), until they pause or `GATHER_MAX_S` passed.
WINDOW_S = 0.005
GATHER_MAX_S = 0.1
MAX_SESSIONS_PER_CALL = 2000
MAX_REQUEST_BYTES = 1 << 20  # 1 MiB; a body names at most 960 sessions (~45 KiB, docs/upstream.md §14)


RETRIES = 3
# What the serve may spend answering sync-log calls, in items a second (every aggregate's, the whole logs
# of unnamed sessions included): after a call of N items the next one waits N / ITEMS_PER_S seconds (at
# most 10 s), and every repair asked meanwhile joins it (BRIDGE_SYNC_ITEMS_PER_S; docs/mirror.md).
ITEMS_PER_S = 50_000.0


@dataclass
class _Ask:
    wanted: Wanted
    answer: asyncio.Future[list[Any]]
    attempts: int = 0


@dataclass(frozen=True)
class BatchSettings:
    """How the batcher gathers and sizes its calls (the module doc)."""

    window_s: float = WINDOW_S
    gather_max_s: float = GATHER_MAX_S
    max_sessions: int = MAX_SESSIONS_PER_CALL
    max_request_bytes: int = MAX_REQUEST_BYTES
    retries: int = RETRIES
    max_named: int = MAX_NAMED
    riders: bool = True  # False: every session asked in a call of its own (bench: the old way)
    items_per_s: float = ITEMS_PER_S


class Slot(Protocol):
    """A sync slot (bridge.upstream.client.Slots), held for one call."""

    async def acquire(self) -> object: ...
    def release(self) -> None: ...


class SyncBatcher:
    def __init__(self, post: Post, known: Callable[[], Mapping[str, int]], learn: Callable[[Mapping[str, int]], None],
                 slots: Slot, settings: BatchSettings = BatchSettings(), backoff: Backoff | None = None) -> None:
        self._post = post
        self._known = known
        self._learn = learn
        self._acquire = slots.acquire
        self._release = slots.release
        s = settings
        self._window_s = s.window_s
        self._gather_max_s = s.gather_max_s
        self._max_sessions = s.max_sessions
        self._max_bytes = s.max_request_bytes
        self._retries = s.retries
        self._max_named = s.max_named
        self._riders = s.riders
        self._backoff = backoff or Backoff(0.2, 2.0)
        self._pace = ItemPace(s.items_per_s)
        self._queue: list[_Ask] = []
        self._drainer: asyncio.Task[None] | None = None
        self._calls: set[asyncio.Task[None]] = set()
        self._log = structlog.get_logger("bridge.sync")

    async def paced(self) -> None:
        """Wait for the item budget (a call made outside the batcher: discovery's heads)."""
        loop = asyncio.get_running_loop()
        while (wait := self._pace.wait(loop.time())) > 0:
            metrics.SYNC_PACED_SECONDS.inc(wait)
            await asyncio.sleep(wait)

    def charge(self, items: int) -> None:
        """An answer read outside the batcher counts against the budget too."""
        self._pace.spent(items, asyncio.get_running_loop().time())

    async def fetch(self, session_id: str, after: int) -> list[Any]:
        """The session's sync-log items after `after` (exclusive; below 0: from seq 0), in the answer's
        order; items that are not objects with an `aggregate_id` come to a session of their call."""
        ask = _Ask(Wanted(session_id, after), asyncio.get_running_loop().create_future())
        self._enqueue([ask])
        return await ask.answer

    def _enqueue(self, asks: list[_Ask]) -> None:
        self._queue.extend(asks)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="sync-batcher")

    async def _gather(self) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + self._gather_max_s
        seen = -1
        while len(self._queue) != seen and loop.time() < until:
            seen = len(self._queue)
            await asyncio.sleep(self._window_s)

    async def _drain(self) -> None:
        await self._gather()
        loop = asyncio.get_running_loop()
        while True:
            self._queue = [a for a in self._queue if not a.answer.done()]
            if not self._queue:
                return
            paced = self._pace.wait(loop.time())
            if paced > 0:  # the last answers were large: the asks of the meantime go into one call
                metrics.SYNC_PACED_SECONDS.inc(paced)
                await asyncio.sleep(paced)
                continue
            await self._acquire()  # meanwhile the queue grows: the next call asks for more sessions
            self._queue = [a for a in self._queue if not a.answer.done()]
            if not self._queue:
                self._release()
                return
            call, riders = self._take()
            task = asyncio.create_task(self._call(call, riders), name="sync-call")
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    def _take(self) -> tuple[list[_Ask], list[_Ask]]:
        """The next call, and its riders: every other waiting session that the body will not name. An
        aggregate the body does not name comes back whole (docs/upstream.md §14), so the answer holds their
        logs anyway, complete as of a moment after they asked: they are answered from it, no call of their
        own. Only a session asked twice (another cursor) waits for a later call."""
        by_wanted = {id(a.wanted): a for a in self._queue}
        taken, later = plan_call([a.wanted for a in self._queue], self._known(), max_sessions=self._max_sessions,
                                 max_request_bytes=self._max_bytes, max_named=self._max_named)
        call = [by_wanted[id(w)] for w in taken]
        in_call = {w.session_id for w in taken}
        rest = [by_wanted[id(w)] for w in later]
        if not self._riders:
            self._queue = rest
            return call, []
        self._queue = [a for a in rest if a.wanted.session_id in in_call]
        return call, [a for a in rest if a.wanted.session_id not in in_call]

    async def _call(self, call: list[_Ask], riders: list[_Ask]) -> None:
        try:
            again = await self._ask(call, riders)
        finally:
            self._release()
        if again:  # outside the slot: the others' calls go on meanwhile
            await asyncio.sleep(self._backoff.next_delay())
            self._enqueue(again)

    async def _ask(self, call: list[_Ask], riders: list[_Ask]) -> list[_Ask]:
        """Post one call and hand out its answer; returns the asks to queue again (after a backoff)."""
        call = [a for a in call if not a.answer.done()]
        riders = [a for a in riders if not a.answer.done()]
        if not call:
            self._enqueue(riders)
            return []
        wanted = [a.wanted for a in call]
        metrics.SYNC_CALLS.inc()
        metrics.SYNC_CALL_SESSIONS.observe(len(call) + len(riders))
        unnamed = {a.wanted.session_id for a in riders}
        keep = {a.wanted.session_id: a.wanted.after for a in call + riders}
        try:
            answer = await self._post(body(wanted, self._known(), self._max_named, unnamed), keep)
        except (BodyTooLarge, InvalidRequest) as e:
            if riders:  # without riders the body names the largest logs: a smaller answer
                self._enqueue(riders)
                return await self._ask(call, [])
            if len(call) == 1:  # this session's own answer: its `BodyTooLarge` or bad cursor
                _fail(call, e)
                return []
            first, second = halves(call)  # the others of the call are not held up by one session
            self._log.info("sync_call_split", sessions=len(call), error=type(e).__name__)
            return await self._ask(first, []) + await self._ask(second, [])
        except UpstreamUnavailable as e:
            metrics.SYNC_CALL_FAILURES.inc()
            for a in call:
                a.attempts += 1
            again = [a for a in call if a.attempts <= self._retries]
            _fail([a for a in call if a.attempts > self._retries], e)
            self._log.warning("sync_call_failed", sessions=len(call), again=len(again), error=str(e))
            self._enqueue(riders)
            return again
        except Exception as e:  # every session of the call retries on its own (module doc)
            _fail(call, e)
            self._enqueue(riders)
            return []
        self._backoff.reset()
        asked = call + riders
        self._pace.spent(answer.answered, asyncio.get_running_loop().time())
        split = split_answer(answer.items, [a.wanted for a in asked])
        if answer.seen:
            self._learn(answer.seen)
        if split.unattributed:  # kept by one session of the call, which rejects them (docs/mirror.md)
            split.items[0].extend(split.unattributed)
        for a, mine in zip(asked, split.items, strict=True):
            if not a.answer.done():
                a.answer.set_result(mine)
        return []


def _fail(call: list[_Ask], e: BaseException) -> None:
    for a in call:
        if not a.answer.done():
            a.answer.set_exception(e)
