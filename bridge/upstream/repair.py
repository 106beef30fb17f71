"""The live side of one session's ingest: the exact sync twins of `/global/event` and the requests for a
sync-log repair (docs/mirror.md, "One cursor, two sources"; the cursor, the lock and the repair itself
are the session's `SessionIngest`, bridge.upstream.ingest).

- An exact twin at cursor+1 is stored directly (no REST call); twins above it wait for the hole to fill,
  then poke a repair: up to `hold_s` (plus the process's backlog) when every missing seq is a v2 seq
  `/global/event` announced (the durable stream delivers it, usually within milliseconds), else
  `debounce_s` (bridge.upstream.twin_hold).
  Every stored batch wakes the waiting twins. Pokes coalesce: at most one repair runs per session, so a
  long legacy turn costs a handful of requests.
- A repair the upstream could not answer is asked again after `retry_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.errors import InvalidRequest, SessionNotFound, UpstreamError
from bridge.events import Envelope
from bridge.events.syncframes import contiguous_run
from bridge.upstream.ingest import SessionIngest
from bridge.upstream.twin_hold import MAX_EXPLAINED_SPAN, forget_through, hole_wait

MAX_PENDING_TWINS = 2000  # more waiting twins than this: drop them, the repair reads the log anyway


class SyncRepair:
    def __init__(self, ingest: SessionIngest, log: FilteringBoundLogger, *, debounce_s: float = 0.03,
                 retry_s: float = 1.0, hold_s: float = 3.0, backlog: Callable[[], float] | None = None) -> None:
        self._ingest = ingest
        self._backlog = backlog  # how late the process serves durable streams now (bridge.upstream.stall)
        self._log = log
        self._debounce_s = debounce_s
        self._hold_s = hold_s
        self._retry_s = retry_s
        self._twins: dict[int, Envelope] = {}
        ingest.waiting_twins = self._twins  # a durable batch fills its holes from them
        ingest.hold_ahead = self._hold_ahead  # ... and waits with them above a hole not shown yet
        self._announced: set[int] = set()  # v2 seqs above the cursor shown by /global/event
        self._live_top = -1  # the highest seq /global/event showed of this session (it shows them in order)
        self._wanted: str | None = None  # the cause of a requested repair not yet run
        self._wake = asyncio.Event()
        # Re-read the cursor from the database before the next repair (after the database came back:
        # docs/scaling.md "Failover").
        self._reload_wanted = False
        self.twins_written = 0

    @property
    def behind(self) -> bool:
        """Events wait above a hole, or a repair is asked and not run yet."""
        return bool(self._twins) or self._wanted is not None

    @property
    def fed(self) -> bool:
        """`/global/event` has shown this session something since this follower started."""
        return self._live_top >= 0

    # -- hints from the live stream -----------------------------------------------------------------
    def offer(self, env: Envelope) -> None:
        """An exact sync twin (its payload is the sync log's): stored as soon as it is next in line."""
        if env.seq is None:
            return
        self._live_top = max(self._live_top, env.seq)
        if env.seq > self._ingest.cursor:
            self._wait_with(env)

    def _wait_with(self, env: Envelope) -> None:
        if len(self._twins) >= MAX_PENDING_TWINS:
            self._twins.clear()
            self._wanted = self._wanted or "twin_overflow"
        self._twins[env.seq] = env  # type: ignore[index]  # callers pass events with a seq
        self._wake.set()

    def _hold_ahead(self, events: list[Envelope]) -> bool:
        """Durable events above a hole: they wait with the twins when every seq missing below them is
        one `/global/event` has not shown yet (it delivers them; the hold bounds the wait), else False."""
        if self._live_top < 0:  # /global/event never showed this session: nothing says it will
            return False
        cursor = self._ingest.cursor
        top = max((e.seq for e in events if e.seq is not None), default=cursor)
        have = {e.seq for e in events} | self._twins.keys() | self._announced
        if top - cursor > MAX_EXPLAINED_SPAN or any(
                s <= self._live_top and s not in have for s in range(cursor + 1, top)):
            return False
        for env in events:
            self._wait_with(env)
        return True

    def announce(self, seq: int) -> None:
        """/global/event showed this v2 seq: the durable stream delivers it (a hole of such seqs is waited for)."""
        if seq > self._live_top:
            self._live_top = seq
            if self._twins:  # durable events waiting above seqs not shown yet: shown now, or lost
                self._wake.set()
        if seq <= self._ingest.cursor:
            return
        if len(self._announced) >= MAX_PENDING_TWINS:
            self._announced.clear()  # holes look unexplained: asked for after the debounce, as before
        self._announced.add(seq)

    def progressed(self) -> None:
        """A batch was stored: twins waiting above a hole may be next in line now."""
        if self._twins:
            self._wake.set()

    def request(self, cause: str) -> None:
        """Read the sync log from the cursor soon (coalesced with every other request and twin)."""
        self._wanted = self._wanted or cause
        self._wake.set()

    def request_reload(self, cause: str) -> None:
        """Check the stored cursor against ours, then read the sync log from the lower of the two."""
        self._reload_wanted = True
        self.request(cause)

    # -- the inbox task -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Forever: store waiting twins, repair when asked or when a hole stays open. Store errors
        (lease lost, database) propagate: the follower ends or restarts."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            hole = await self._drain_twins()
            if not hole and self._wanted is None:
                continue
            if self._wanted is None:
                if not await self._hold():
                    continue
            else:
                await asyncio.sleep(self._debounce_s)  # a burst of twins and pokes costs one request
                self._wake.clear()
                await self._drain_twins()
            await self._repair(self._wanted or "twin_hole")

    async def _hold(self) -> bool:
        """Twins wait above a hole: until it fills (each stored batch wakes them), a repair is requested, or
        their wait (`hole_wait`) is over, counted from the cursor's last move: a durable stream that keeps
        delivering is waited for. True if the log is to be asked."""
        loop = asyncio.get_running_loop()
        start, cursor = loop.time(), self._ingest.cursor
        while True:
            if self._ingest.cursor > cursor:
                start, cursor = loop.time(), self._ingest.cursor
            wait = hole_wait(self._ingest.cursor, self._twins.keys(), self._announced,
                             debounce_s=self._debounce_s, hold_s=self._hold_s,
                             backlog_s=self._backlog() if self._backlog is not None else 0.0,
                             live_top=self._live_top)
            remaining = start + wait - loop.time()
            if remaining <= 0:
                metrics.TWIN_HOLDS.labels(outcome="repaired").inc()
                return True
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._wake.wait()
            self._wake.clear()
            if not await self._drain_twins():
                metrics.TWIN_HOLDS.labels(outcome="filled").inc()
                return self._wanted is not None
            if self._wanted is not None:
                return True

    def _forget_stored(self) -> None:
        cursor = self._ingest.cursor
        for seq in [s for s in self._twins if s <= cursor]:
            del self._twins[seq]
        forget_through(self._announced, cursor)

    async def _drain_twins(self) -> bool:
        """Store the twins that continue the cursor; True if some wait above a hole."""
        ingest = self._ingest
        async with ingest.lock:
            self._forget_stored()
            if not self._twins:
                return False
            run = contiguous_run(ingest.cursor, list(self._twins.values()))
            if run.events:
                for env in run.events:
                    del self._twins[env.seq]  # type: ignore[arg-type]  # a run has seqs only
                self.twins_written += len(run.events)
                metrics.TWINS_WRITTEN.inc(len(run.events))
                await ingest.commit([ingest.map(e) for e in run.events], datetime.now(UTC), "twin")
            return bool(self._twins)

    async def _repair(self, cause: str) -> None:
        try:
            async with self._ingest.lock:
                self._wanted = None
                if self._reload_wanted:
                    self._reload_wanted = False
                    await self._ingest.reload_cursor()
                asked = set(self._twins)  # waiting before the log was read: persisted before it
                if await self._ingest.repair_locked(cause) < 0:
                    await self._twins_over_a_hole()
                else:
                    await self._over_log_holes(asked)
                self._forget_stored()
        except (SessionNotFound, InvalidRequest) as e:  # the follower's own requests end it
            self._log.warning("sync_repair_refused", cause=cause, error=str(e))
        except UpstreamError as e:
            self._log.warning("sync_repair_failed", cause=cause, error=str(e))
            await asyncio.sleep(self._retry_s)
            self.request(cause)

    async def _over_log_holes(self, asked: set[int]) -> None:
        """After a read of the log: what waited before it and is still above the cursor sits above a hole
        the log itself lacks (rule 6): stored as it is, the hole recorded as a gap. What arrived since the
        read began waits on, as always."""
        ingest = self._ingest
        waiting = [self._twins.pop(s) for s in sorted(asked) if s > ingest.cursor and s in self._twins]
        if waiting:
            await ingest.commit([ingest.map(e) for e in waiting], datetime.now(UTC), "twin")

    async def _twins_over_a_hole(self) -> None:
        """The log could not be read (over the body bound): store the waiting twins as they are, so the
        hole before them becomes a recorded gap instead of a repair retried on every twin."""
        ingest = self._ingest
        waiting = [self._twins.pop(s) for s in sorted(self._twins) if s > ingest.cursor]
        self._twins.clear()
        if waiting:
            metrics.TWINS_WRITTEN.inc(len(waiting))
            await ingest.commit([ingest.map(e) for e in waiting], datetime.now(UTC), "twin")
