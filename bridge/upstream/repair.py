"""The live side of one session's ingest: the exact sync twins of `/global/event` and the requests for a
sync-log repair (docs/mirror.md, "One cursor, two sources"; the cursor, the lock and the repair itself
are the session's `SessionIngest`, bridge.upstream.ingest; what waits above the cursor is its
`TwinShelf`, bridge.upstream.twin_shelf: this class schedules, the ingest stores under its own lock).

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
from collections.abc import Callable
from dataclasses import dataclass

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.errors import InvalidRequest, SessionNotFound, UpstreamError
from bridge.events import Envelope
from bridge.upstream.ingest import SessionIngest
from bridge.upstream.twin_shelf import TwinShelf


@dataclass(frozen=True)
class RepairTimes:
    """How long a repair waits: a burst (`debounce_s`), a hole the durable stream fills (`hold_s`), an
    upstream that could not answer (`retry_s`)."""

    debounce_s: float = 0.03
    retry_s: float = 1.0
    hold_s: float = 3.0


class SyncRepair:
    def __init__(self, ingest: SessionIngest, shelf: TwinShelf, log: FilteringBoundLogger,
                 times: RepairTimes = RepairTimes(), backlog: Callable[[], float] | None = None) -> None:
        self._ingest = ingest
        self._shelf = shelf  # the ingest's: what waits above its cursor (bridge.upstream.twin_shelf)
        self._backlog = backlog  # how late the process serves durable streams now (bridge.upstream.stall)
        self._log = log
        self._times = times
        self._wanted: str | None = None  # the cause of a requested repair not yet run
        # Re-read the cursor from the database before the next repair (after the database came back:
        # docs/scaling.md "Failover").
        self._reload_wanted = False
        self.twins_written = 0

    @property
    def behind(self) -> bool:
        """Events wait above a hole, or a repair is asked and not run yet."""
        return bool(self._shelf) or self._wanted is not None

    def waiting(self) -> frozenset[int]:
        """The seqs that wait above a hole."""
        return self._shelf.waiting()

    @property
    def fed(self) -> bool:
        """`/global/event` has shown this session something since this follower started."""
        return self._shelf.fed

    # -- hints from the live stream -----------------------------------------------------------------
    def offer(self, env: Envelope) -> None:
        """An exact sync twin (its payload is the sync log's): stored as soon as it is next in line."""
        self._shelf.offer(env, self._ingest.cursor)
        self._note_overflow()

    def announce(self, seq: int) -> None:
        """/global/event showed this v2 seq: the durable stream delivers it (a hole of such seqs is waited for)."""
        self._shelf.announce(seq, self._ingest.cursor)

    def progressed(self) -> None:
        """A batch was stored: twins waiting above a hole may be next in line now."""
        if self._shelf:
            self._shelf.ring()

    def request(self, cause: str) -> None:
        """Read the sync log from the cursor soon (coalesced with every other request and twin)."""
        self._wanted = self._wanted or cause
        self._shelf.ring()

    def request_reload(self, cause: str) -> None:
        """Check the stored cursor against ours, then read the sync log from the lower of the two."""
        self._reload_wanted = True
        self.request(cause)

    def _note_overflow(self) -> None:
        if self._shelf.take_overflow():  # twins dropped for their number: the log has them
            self._wanted = self._wanted or "twin_overflow"

    # -- the inbox task -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Forever: store waiting twins, repair when asked or when a hole stays open. Store errors
        (lease lost, database) propagate: the follower ends or restarts."""
        while True:
            await self._shelf.wait()
            hole = await self._drain_twins()
            if not hole and self._wanted is None:
                continue
            if self._wanted is None:
                if not await self._hold():
                    continue
            else:
                await asyncio.sleep(self._times.debounce_s)  # a burst of twins and pokes costs one request
                self._shelf.silence()
                await self._drain_twins()
            await self._repair(self._wanted or "twin_hole")

    async def _hold(self) -> bool:
        """Twins wait above a hole: until it fills (each stored batch wakes them), a repair is requested, or
        their wait (`hole_wait`) is over, counted from the cursor's last move: a durable stream that keeps
        delivering is waited for. True if the log is to be asked."""
        loop = asyncio.get_running_loop()
        start, cursor = loop.time(), self._ingest.cursor
        t = self._times
        while True:
            if self._ingest.cursor > cursor:
                start, cursor = loop.time(), self._ingest.cursor
            wait = self._shelf.wait_s(self._ingest.cursor, debounce_s=t.debounce_s, hold_s=t.hold_s,
                                      backlog_s=self._backlog() if self._backlog is not None else 0.0)
            remaining = start + wait - loop.time()
            if remaining <= 0:
                metrics.TWIN_HOLDS.labels(outcome="repaired").inc()
                return True
            await self._shelf.wait(remaining)
            if not await self._drain_twins():
                metrics.TWIN_HOLDS.labels(outcome="filled").inc()
                return self._wanted is not None
            if self._wanted is not None:
                return True

    async def _drain_twins(self) -> bool:
        """Store the twins that continue the cursor; True if some wait above a hole."""
        self._note_overflow()
        written, hole = await self._ingest.store_next_twins()
        if written:
            self.twins_written += written
            metrics.TWINS_WRITTEN.inc(written)
        return hole

    def _start(self) -> bool:
        """A repair begins (the ingest's lock held): the request is taken; True if the cursor is to be
        checked against the database first."""
        self._wanted = None
        reload, self._reload_wanted = self._reload_wanted, False
        return reload

    async def _repair(self, cause: str) -> None:
        try:
            over_a_hole = await self._ingest.repair(cause, self._start)
            if over_a_hole:
                metrics.TWINS_WRITTEN.inc(over_a_hole)
        except (SessionNotFound, InvalidRequest) as e:  # the follower's own requests end it
            self._log.warning("sync_repair_refused", cause=cause, error=str(e))
        except UpstreamError as e:
            self._log.warning("sync_repair_failed", cause=cause, error=str(e))
            await asyncio.sleep(self._times.retry_s)
            self.request(cause)
