"""One claim queue per process: the lease claims of many sessions in one transaction (docs/lifecycle.md
"Warm-up").

`claim(session_id, directory)` is what one warm session's task awaits; it gets its own `Claim` or its own
`LeaseHeld`, exactly as a claim of its own would give (bridge.store.chat_sessions.claims). The claims asked
in the same moment — 10,000 sessions warmed by one discovery are asked in one turn of the event loop —
are taken together, at most `max_batch` (one per session: bridge.store.chat_sessions.claim_plan) in one
transaction, at most `at_once` transactions at a time; while they run the queue grows into the next batch.
A lone claim (a live event warms one session) waits for nothing but its own transaction.

A batch whose transaction fails for the environment (the database away, the pool exhausted:
bridge.sessions.parking.is_transient) fails every claim of it, each caller retrying as before; any other
failure (a value one session's row cannot hold) is asked again in two halves, so one bad claim fails alone.
A caller cancelled while its batch runs may leave a lease taken without a follower: the lease keeper gives
such a stray lease back at its next heartbeat (bridge.sessions.keeper).

`settled()` waits until no claim is waiting or running (at most `max_wait_s`): a claimed session starts its
catch-up then, so that a warm-up claims every session first, undisturbed, and their catch-ups then ask the
sync log together — a few calls answer thousands of sessions — instead of one call per batch of claims,
each carrying the whole logs of every session not named (docs/upstream.md §14).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bridge import metrics
from bridge.sessions.parking import is_transient
from bridge.store.chat_sessions import Claim, ClaimAsk, ClaimOutcome
from bridge.store.chat_sessions.claim_plan import next_batch

ClaimMany = Callable[[Sequence[ClaimAsk]], Awaitable[list[ClaimOutcome]]]

# 200 claims cost one commit (one fsync) and three statements of a few ms; two transactions at once keep
# PostgreSQL busy while the other's answers are handed out, far below the write pool.
MAX_CLAIMS_PER_BATCH = 200
BATCHES_AT_ONCE = 2


@dataclass(frozen=True)
class _Waiting:
    session_id: str
    directory: str | None
    answer: asyncio.Future[Claim]


class ClaimBatcher:
    def __init__(self, claim_many: ClaimMany, *, max_batch: int = MAX_CLAIMS_PER_BATCH,
                 at_once: int = BATCHES_AT_ONCE) -> None:
        self._claim_many = claim_many
        self._max_batch = max_batch
        self._slots = asyncio.Semaphore(at_once)
        self._queue: list[_Waiting] = []
        self._drainer: asyncio.Task[None] | None = None
        self._batches: set[asyncio.Task[None]] = set()
        self._settled = asyncio.Event()  # nothing waiting, nothing running
        self._settled.set()

    async def claim(self, session_id: str, directory: str | None = None) -> Claim:
        """The session's lease (raises `LeaseHeld` when a live peer holds it or it is deleted)."""
        answer: asyncio.Future[Claim] = asyncio.get_running_loop().create_future()
        self._queue.append(_Waiting(session_id, directory, answer))
        self._settled.clear()
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="claim-batcher")
        return await answer

    @property
    def waiting(self) -> int:
        return len(self._queue)

    async def settled(self, max_wait_s: float) -> None:
        """Until no claim waits or runs, or `max_wait_s` passed (a steady stream of claims never holds a
        claimed session's catch-up longer)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max_wait_s):
                await self._settled.wait()

    def _check_settled(self) -> None:
        if not self._batches and not self._pending():
            self._settled.set()

    def _pending(self) -> list[_Waiting]:
        return [w for w in self._queue if not w.answer.done()]  # a cancelled caller is left out

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # the claims asked in this turn of the loop join the first batch
        while True:
            self._queue = self._pending()
            if not self._queue:
                self._check_settled()
                return
            await self._slots.acquire()  # meanwhile the queue grows: the next batch takes more
            self._queue = self._pending()
            if not self._queue:
                self._slots.release()
                self._check_settled()
                return
            batch, self._queue = next_batch(self._queue, self._max_batch)
            task = asyncio.create_task(self._run(batch), name="claim-batch")
            self._batches.add(task)
            task.add_done_callback(self._batch_done)

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self._batches.discard(task)
        self._check_settled()

    async def _run(self, batch: list[_Waiting]) -> None:
        try:
            await self._ask(batch)
        finally:
            self._slots.release()
            for w in batch:  # only if this task itself was cancelled (the process stopping)
                if not w.answer.done():
                    w.answer.cancel()

    async def _ask(self, batch: list[_Waiting]) -> None:
        batch = [w for w in batch if not w.answer.done()]
        if not batch:
            return
        metrics.CLAIM_BATCHES.inc()
        metrics.CLAIM_BATCH_SESSIONS.observe(len(batch))
        try:
            outcomes = await self._claim_many([ClaimAsk(w.session_id, w.directory) for w in batch])
        except Exception as e:
            if len(batch) == 1 or is_transient(e):
                for w in batch:
                    _answer(w, e)
                return
            half = len(batch) // 2
            await self._ask(batch[:half])
            await self._ask(batch[half:])
            return
        for w, outcome in zip(batch, outcomes, strict=True):
            _answer(w, outcome)


def _answer(w: _Waiting, outcome: ClaimOutcome) -> None:
    if w.answer.done():
        return
    if isinstance(outcome, Claim):
        w.answer.set_result(outcome)
    else:  # its `LeaseHeld`, or the error of its own row
        w.answer.set_exception(outcome)
