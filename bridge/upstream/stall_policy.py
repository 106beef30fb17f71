"""When a late durable stream is reconnected: the stall watchdogs' process-wide view (pure, no I/O;
docs/mirror.md "The stall watchdog, process-wide").

Each follower's watch (bridge.upstream.stall) starts a *wait* when `/global/event` announces a v2 seq above its
cursor and ends it when a batch is stored. A wait of `stall_s` used to end the stream at once. That is right
for one stuck stream and wrong for ten thousand late ones: when the daemon is slow (a burst of 10,000
sessions on 2 busy cores, a profiler), every stream's data sits in its socket or in the write queue while
the one `/global/event` connection runs ahead, and reconnecting them all (each a sync-log repair, a
`/history` page and a new connection) made a 9 s burst last 129-239 s. One `StallGovernor` per process
decides instead, from what every watch tells it (a wait opened, a wait closed, a batch stored after waiting
so long):

- **the lateness of the process**: how long the streams that *did* deliver had been waiting (the largest
  wait among deliveries of the last `stall_s`, the *backlog*), plus, while a crowd of streams waits (at
  least `crowd` open waits), the time since the process last delivered anything (the *pause*: a process
  that stores nothing for a while, behind a slow commit or a long collection, makes every wait grow at
  once, and that says nothing about any one stream). A stream is stuck only when it waited `stall_s`
  longer than that: while the process serves the streams 25 s after their announcements, a stream 26 s
  late is in the queue, not stuck; in a crowd, a stream is stuck when it had waited `stall_s` + the backlog
  already at the process's last delivery. The bound is capped at `max_wait_s`, so a stuck stream is
  reconnected within it under any load; a reconnected stream's catch-up is not a delivery (the watch only
  reports waits that a stored batch ended while its stream was open), so repairs never raise the bound;
- **a budget**: reconnects for stalls are granted at most `rate_per_s` per second after a `burst` (a
  generic cell-rate algorithm). A refused stream gets a reserved slot, a *ticket*, when one is free within
  the next `burst` slots, and is granted then if it is still beyond the bound; the rest ask again after
  that horizon. A single stuck stream always finds the budget full; a crowd beyond the bound trickles
  instead of storming.

A quiet process has no backlog and no crowd: one stuck stream is reconnected after `stall_s`, as before.
Fewer than `crowd` streams stuck together in an otherwise idle process are too; more (every durable stream
of the serve silent at once) are reconnected after `max_wait_s`, at the budget's rate.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

MAX_WAIT_FACTOR = 12.0  # the bound never exceeds 12 x stall_s (120 s by default)
RATE_PER_S = 20.0  # stall reconnects granted per second once the burst is spent
BURST = 50  # stall reconnects granted at once
CROWD = 8  # open waits from which a pause in deliveries is the process's, not the streams'


@dataclass(frozen=True)
class StallVerdict:
    reconnect: bool
    at: float  # when to ask again (reconnect False); `now` when reconnect is True
    ticket: float | None = None  # a reserved budget slot to present at `at`
    why: str = "stuck"  # "stuck" (reconnect), "backlog" (within the bound), "budget" (beyond it, waiting a slot)


class StallGovernor:
    def __init__(self, stall_s: float, *, max_wait_s: float | None = None, rate_per_s: float = RATE_PER_S,
                 burst: int = BURST, crowd: int = CROWD) -> None:
        if stall_s <= 0 or rate_per_s <= 0 or burst < 1:
            raise ValueError("stall_s and rate_per_s must be positive, burst at least 1")
        self.stall_s = stall_s
        self.max_wait_s = max(stall_s, max_wait_s if max_wait_s is not None else stall_s * MAX_WAIT_FACTOR)
        self._interval = 1.0 / rate_per_s
        self._tolerance = (burst - 1) * self._interval
        # Slots are reserved at most this far ahead (`burst` of them), so reservations that lapse (their
        # stream delivered after all) delay a later stuck stream by at most that much.
        self._horizon = burst * self._interval
        self._tat = float("-inf")  # the budget's theoretical arrival time (GCRA)
        self._waits: deque[tuple[float, float]] = deque()  # (delivered at, wait): waits decrease left to right
        self._crowd = max(1, crowd)
        self.open_waits = 0
        self._last_delivery = float("-inf")
        self._crowd_since = float("-inf")  # when the open waits last reached `crowd`

    # -- what the watches report ------------------------------------------------------------------
    def delivered(self, waited_s: float, now: float) -> None:
        """A stream stored a batch after waiting `waited_s` for an announced seq (its stream open)."""
        waits = self._waits
        while waits and waits[-1][1] <= waited_s:
            waits.pop()  # a smaller wait that is also older can never be the window's largest
        waits.append((now, waited_s))
        self._last_delivery = max(self._last_delivery, now)
        self._expire(now)

    def opened(self, now: float) -> None:
        """A stream started waiting for an announced seq."""
        self.open_waits += 1
        if self.open_waits == self._crowd:
            self._crowd_since = now

    def closed(self) -> None:
        """A stream's wait ended (a batch stored, or the stream ended)."""
        self.open_waits = max(0, self.open_waits - 1)

    def backlog(self, now: float) -> float:
        """The largest wait among the deliveries of the last `stall_s` (0: none)."""
        self._expire(now)
        return self._waits[0][1] if self._waits else 0.0

    def pause(self, now: float) -> float:
        """While a crowd waits: how long the process has delivered nothing (since the crowd formed at most)."""
        if self.open_waits < self._crowd:
            return 0.0
        return max(0.0, now - max(self._last_delivery, self._crowd_since))

    def lateness(self, now: float) -> float:
        """How late the process serves the durable streams now: the backlog plus the pause."""
        return self.backlog(now) + self.pause(now)

    def bound(self, now: float) -> float:
        """How long a stream may wait for an announced seq before it counts as stuck."""
        return min(self.stall_s + self.lateness(now), self.max_wait_s)

    # -- the decision -----------------------------------------------------------------------------
    def overdue(self, waited_s: float, now: float, ticket: float | None = None) -> StallVerdict:
        """A stream has waited `waited_s` (at least `stall_s`): reconnect it now, or ask again at `at`."""
        bound = self.bound(now)
        if waited_s < bound:
            return StallVerdict(False, now + (bound - waited_s), None, "backlog")  # a held ticket lapses
        if ticket is not None:
            if ticket <= now:
                return StallVerdict(True, now)
            return StallVerdict(False, ticket, ticket, "budget")
        tat = max(self._tat, now)
        slot = tat - self._tolerance
        if slot > now + self._horizon + self._interval / 2:  # every slot within the horizon is reserved:
            # ask again after it (half a slot of margin for rounding)
            return StallVerdict(False, now + self._horizon, None, "budget")
        self._tat = tat + self._interval
        if slot <= now:
            return StallVerdict(True, now)
        return StallVerdict(False, slot, slot, "budget")

    def _expire(self, now: float) -> None:
        waits = self._waits
        horizon = now - self.stall_s
        while waits and waits[0][0] < horizon:
            waits.popleft()
