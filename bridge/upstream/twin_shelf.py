"""What waits above one session's cursor, and the doorbell of the session's repair task (docs/mirror.md,
"One cursor, two sources"): exact sync twins of `/global/event` and durable events above a hole, by seq;
the v2 seqs `/global/event` announced; the highest seq it showed.

One object, read and written through its methods only: the session's `SessionIngest` fills a durable
batch's holes from it and puts durable events above a hole not shown yet on it (`hold_ahead`); the
session's `SyncRepair` offers twins, records announcements and takes what is next in line. Neither holds
the other's fields. No I/O; `ring()` wakes whoever waits in `wait()`.
"""

from __future__ import annotations

import asyncio
import contextlib

from bridge.events import Envelope
from bridge.events.syncframes import contiguous_run
from bridge.upstream.twin_hold import MAX_EXPLAINED_SPAN, forget_through, hole_wait

MAX_PENDING_TWINS = 2000  # more waiting twins than this: drop them, the repair reads the log anyway


class TwinShelf:
    def __init__(self) -> None:
        self._twins: dict[int, Envelope] = {}
        self._announced: set[int] = set()  # v2 seqs above the cursor shown by /global/event
        self._live_top = -1  # the highest seq /global/event showed of this session (it shows them in order)
        self._bell = asyncio.Event()
        self._overflowed = False

    # -- questions ------------------------------------------------------------------------------------
    def __bool__(self) -> bool:
        """Something waits above a hole."""
        return bool(self._twins)

    def waiting(self) -> frozenset[int]:
        return frozenset(self._twins)

    @property
    def fed(self) -> bool:
        """`/global/event` has shown this session something."""
        return self._live_top >= 0

    def wait_s(self, cursor: int, *, debounce_s: float, hold_s: float, backlog_s: float) -> float:
        """How long the waiting events may wait for their hole (bridge.upstream.twin_hold)."""
        return hole_wait(cursor, self._twins.keys(), self._announced, debounce_s=debounce_s, hold_s=hold_s,
                         backlog_s=backlog_s, live_top=self._live_top)

    def fill(self, cursor: int, events: list[Envelope]) -> list[Envelope]:
        """The waiting events in the holes between `events`' seqs (above `cursor`), in seq order."""
        have = {e.seq for e in events}
        top = max((s for s in have if s is not None), default=cursor)
        return [self._twins[s] for s in sorted(self._twins) if cursor < s < top and s not in have]

    # -- what arrives ---------------------------------------------------------------------------------
    def offer(self, env: Envelope, cursor: int) -> None:
        """An exact twin: it waits when above the cursor."""
        if env.seq is None:
            return
        self._live_top = max(self._live_top, env.seq)
        if env.seq > cursor:
            self._put(env)

    def _put(self, env: Envelope) -> None:
        if len(self._twins) >= MAX_PENDING_TWINS:
            self._twins.clear()
            self._overflowed = True
        self._twins[env.seq] = env  # type: ignore[index]  # callers pass events with a seq
        self._bell.set()

    def hold_ahead(self, cursor: int, events: list[Envelope]) -> bool:
        """Durable events above a hole: they wait here when every seq missing below them is one
        `/global/event` has not shown yet (it delivers them; the hold bounds the wait), else False."""
        if self._live_top < 0:  # /global/event never showed this session: nothing says it will
            return False
        top = max((e.seq for e in events if e.seq is not None), default=cursor)
        have = {e.seq for e in events} | self._twins.keys() | self._announced
        if top - cursor > MAX_EXPLAINED_SPAN or any(
                s <= self._live_top and s not in have for s in range(cursor + 1, top)):
            return False
        for env in events:
            self._put(env)
        return True

    def announce(self, seq: int, cursor: int) -> None:
        """/global/event showed this v2 seq: the durable stream delivers it (a hole of such seqs is waited for)."""
        if seq > self._live_top:
            self._live_top = seq
            if self._twins:  # durable events waiting above seqs not shown yet: shown now, or lost
                self._bell.set()
        if seq <= cursor:
            return
        if len(self._announced) >= MAX_PENDING_TWINS:
            self._announced.clear()  # holes look unexplained: asked for after the debounce, as before
        self._announced.add(seq)

    def take_overflow(self) -> bool:
        """Twins were dropped for their number since the last call (the log is to be read)."""
        overflowed, self._overflowed = self._overflowed, False
        return overflowed

    # -- what leaves ----------------------------------------------------------------------------------
    def forget_through(self, cursor: int) -> None:
        """Everything at or below the cursor is stored."""
        for seq in [s for s in self._twins if s <= cursor]:
            del self._twins[seq]
        forget_through(self._announced, cursor)

    def take_next(self, cursor: int) -> list[Envelope]:
        """The waiting events that continue the cursor, taken off."""
        run = contiguous_run(cursor, list(self._twins.values()))
        for env in run.events:
            del self._twins[env.seq]  # type: ignore[arg-type]  # a run has seqs only
        return list(run.events)

    def take(self, seqs: frozenset[int] | None, cursor: int) -> list[Envelope]:
        """The waiting events of `seqs` (None: all) above the cursor, in seq order, taken off; with None
        nothing waits afterwards."""
        chosen = sorted(self._twins if seqs is None else seqs & self._twins.keys())
        taken = [self._twins.pop(s) for s in chosen if s > cursor]
        if seqs is None:
            self._twins.clear()
        return taken

    # -- the doorbell ---------------------------------------------------------------------------------
    def ring(self) -> None:
        self._bell.set()

    async def wait(self, timeout: float | None = None) -> None:
        """Until the bell rings (or `timeout` passes); the bell is silent again afterwards."""
        if timeout is None:
            await self._bell.wait()
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._bell.wait()
        self._bell.clear()

    def silence(self) -> None:
        self._bell.clear()
