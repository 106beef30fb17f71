"""The durable stream's stall watchdog (docs/upstream.md §3.4: no keepalive, never ends).

`/global/event` announces the v2 seqs it shows (`seen`); if the durable stream has not delivered one of
them within `stall_s`, the stream is stuck and is ended, so the follower reconnects from its cursor. Each
stored batch restarts the wait (`arm(progress=True)`); nothing announced beyond the cursor: no timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from bridge.upstream.ingest import SessionIngest


class StallWatch:
    def __init__(self, ingest: SessionIngest, stall_s: float) -> None:
        self._ingest = ingest
        self._stall_s = stall_s
        self.hint_seq = 0  # highest v2 seq announced by /global/event (its sync twins)
        self._timeout: asyncio.Timeout | None = None

    def seen(self, seq: int) -> None:
        """/global/event showed this v2 seq; if it does not arrive soon, the stream is stuck."""
        if seq <= self.hint_seq:
            return
        self.hint_seq = seq
        self.arm()

    def arm(self, progress: bool = False) -> None:
        t = self._timeout
        if t is None:
            return
        if self.hint_seq > self._ingest.cursor:
            if t.when() is None or progress:
                t.reschedule(asyncio.get_running_loop().time() + self._stall_s)
        else:
            t.reschedule(None)

    def end_now(self) -> None:
        """End the watched stream at once (the follower's inbox task failed)."""
        t = self._timeout
        if t is not None:
            t.reschedule(asyncio.get_running_loop().time())

    async def run(self, stream: Callable[[], Awaitable[None]]) -> bool:
        """Read the stream until it ends; True if the stall timer (or `end_now`) ended it."""
        try:
            async with asyncio.timeout(None) as t:
                self._timeout = t
                self.arm()
                await stream()
        except TimeoutError:
            # Only the stall timer can expire here: the stream itself has no timeout (§3.3/§3.4).
            return True
        finally:
            self._timeout = None
        return False
