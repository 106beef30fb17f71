"""The durable stream's stall watchdog (docs/upstream.md §3.4: no keepalive, never ends).

`/global/event` announces the v2 seqs it shows (`seen`); if the durable stream has not delivered one of
them within `stall_s`, the stream may be stuck: the process's `StallGovernor` (bridge.upstream.stall_policy)
says whether to end it now, so the follower reconnects from its cursor, or to look again later (the
process serves every stream late, or the budget of stall reconnects is spent). Each stored batch ends the
wait and tells the governor how long it lasted (`arm(progress=True)`), and starts the next one if more is
announced; nothing announced beyond the cursor: no timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from bridge import metrics
from bridge.upstream.ingest import SessionIngest
from bridge.upstream.stall_policy import StallGovernor


class StallWatch:
    def __init__(self, ingest: SessionIngest, stall_s: float, governor: StallGovernor | None = None) -> None:
        self._ingest = ingest
        self._stall_s = stall_s
        self._governor = governor if governor is not None else StallGovernor(stall_s)
        self.hint_seq = 0  # highest v2 seq announced by /global/event (its sync twins)
        self._timeout: asyncio.Timeout | None = None  # set while the stream is read (`run`)
        self._since: float | None = None  # when the current wait began (loop time); None: no wait
        self._check: asyncio.TimerHandle | None = None
        self._ticket: float | None = None  # a budget slot the governor reserved for this stream
        self._held = False  # the governor held the current wait past `stall_s` (counted once)

    def seen(self, seq: int) -> None:
        """/global/event showed this v2 seq; if it does not arrive soon, the stream is stuck."""
        if seq <= self.hint_seq:
            return
        self.hint_seq = seq
        self.arm()

    def arm(self, progress: bool = False) -> None:
        if self._timeout is None:
            return
        now = asyncio.get_running_loop().time()
        if progress and self._since is not None:
            self._governor.delivered(now - self._since, now)  # the stream delivers: this late
        if self.hint_seq > self._ingest.cursor:
            if self._since is None or progress:
                self._wait(now)
        else:
            self._settle()

    def backlog(self) -> float:
        """How late the process serves the durable streams now (0 when they come on time), at most the
        governor's cap on a wait."""
        return min(self._governor.lateness(asyncio.get_running_loop().time()), self._governor.max_wait_s)

    def end_now(self) -> None:
        """End the watched stream at once (the follower's inbox task failed)."""
        t = self._timeout
        if t is not None:
            t.reschedule(asyncio.get_running_loop().time())

    async def run(self, stream: Callable[[], Awaitable[None]]) -> bool:
        """Read the stream until it ends; True if the watchdog (or `end_now`) ended it."""
        try:
            async with asyncio.timeout(None) as t:
                self._timeout = t
                self.arm()
                await stream()
        except TimeoutError:
            # Only the watchdog can expire here: the stream itself has no timeout (§3.3/§3.4).
            return True
        finally:
            self._timeout = None
            self._settle()
        return False

    # -- the wait ---------------------------------------------------------------------------------
    def _wait(self, now: float) -> None:
        self._settle()
        self._since = now
        self._governor.opened(now)
        self._check = asyncio.get_running_loop().call_at(now + self._stall_s, self._due)

    def _settle(self) -> None:
        if self._check is not None:
            self._check.cancel()
        if self._since is not None:
            self._governor.closed()
        self._check = None
        self._since = None
        self._ticket = None
        self._held = False

    def _due(self) -> None:
        t, since = self._timeout, self._since
        if t is None or since is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        verdict = self._governor.overdue(now - since, now, self._ticket)
        if verdict.reconnect:
            self._check = None
            t.reschedule(now)  # the stream ends with TimeoutError: `run` returns True
            return
        if not self._held:
            self._held = True
            metrics.DURABLE_STALL_HOLDS.labels(why=verdict.why).inc()
        self._ticket = verdict.ticket
        self._check = loop.call_at(verdict.at, self._due)
