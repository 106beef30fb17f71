"""What `/global/event` showed of a session while its follower was being started (pure; docs/mirror.md
"A repair only for a real hole").

A session warms at its first live event, but its follower exists only once its lease is claimed (a
database round trip, batched with other claims). The twins that arrive meanwhile used to be dropped, so
every follower began with a sync-log read from its cursor — and on a serve with more sessions than one
body can name, every such read answers the serve's whole history (docs/upstream.md §14). Kept here
instead, they tell the new follower whether anything above its cursor could have been missed:

`/global/event` shows every persisted event of a session, in seq order, once per connection. If the
lowest seq seen on this connection is at most cursor + 1, every seq above the cursor has been or will be
shown: the exact twins (legacy events) are stored as they come, the announced v2 seqs come on the durable
stream (`after=cursor`), and a seq still missing after the hold is a real hole, repaired then (rule 3).
So the follower starts **without** reading the sync log. Anything else — no twin seen, the lowest above
cursor + 1, a `/global/event` reconnect since the first twin, more twins than `cap` — starts with the read,
as before.
"""

from __future__ import annotations

from bridge.events import Envelope

CAP = 2000  # as many twins as a follower holds above a hole (bridge.upstream.repair)


class EarlyTwins:
    def __init__(self, cap: int = CAP) -> None:
        self._cap = cap
        self.exact: dict[int, Envelope] = {}  # legacy events' twins: the payload to store
        self.announced: set[int] = set()  # v2 seqs: the durable stream delivers them
        self.lowest: int | None = None
        self.broken = False  # a reconnect or an overflow: nothing is known

    def twin(self, env: Envelope) -> None:
        if env.seq is not None and self._note(env.seq):
            self.exact[env.seq] = env

    def seen(self, seq: int) -> None:
        if self._note(seq):
            self.announced.add(seq)

    def _note(self, seq: int) -> bool:
        if self.broken:
            return False
        if len(self.exact) + len(self.announced) >= self._cap:
            self.lost()
            return False
        if self.lowest is None or seq < self.lowest:
            self.lowest = seq
        return True

    def lost(self) -> None:
        """`/global/event` reconnected (what it sent meanwhile is gone), or too much to hold."""
        self.broken = True
        self.exact.clear()
        self.announced.clear()

    def covers(self, cursor: int) -> bool:
        """Every seq above `cursor` has been or will be shown by the live stream."""
        return not self.broken and self.lowest is not None and self.lowest <= cursor + 1
