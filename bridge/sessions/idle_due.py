"""Which warm sessions have been idle long enough to be looked at by the sweep (pure; docs/lifecycle.md
"Idle release (GC) vs interrupt").

The sweep may release a session only when its last activity is at least `idle_ttl_s` old
(bridge.sessions.gc). It used to find those by walking every warm session every `sweep_interval_s`: 10,000
comparisons every 5 s with nothing to find, the largest share of an idle daemon's Python work at 10,000
warm sessions. `IdleDue` keeps the sessions in a heap by the last activity each was seen with, and is told
nothing when an activity moves on (a stored batch only sets a number): an entry that comes due is checked
against the session's activity now, and pushed again when it moved. A session found idle stays on a short
list, checked every sweep (the sweep keeps it warm while it has subscribers, a turn, or is listed active)
until it is active again, back into the heap, or gone. Each session is in the heap or on that list once,
under the token it was tracked with (a session warmed again is a new token; the old entry is dropped when
it comes up).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

# (the session, the token it was tracked with) -> its last activity now; None: no longer tracked
ActivityOf = Callable[[str, T], float | None]


class IdleDue(Generic[T]):
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, T]] = []
        self._n = 0  # ties: first tracked, first out (tokens need not be comparable)
        self._idle: dict[str, T] = {}  # found idle, checked every time

    def __len__(self) -> int:
        return len(self._heap) + len(self._idle)

    def track(self, session_id: str, token: T, activity: float) -> None:
        """A session to watch, as `token`, last active at `activity`."""
        self._n += 1
        heapq.heappush(self._heap, (activity, self._n, session_id, token))

    def due(self, horizon: float, activity_of: ActivityOf[T]) -> list[tuple[str, T]]:
        """Every tracked session whose last activity now is at or before `horizon`, each once."""
        heap = self._heap
        while heap and heap[0][0] <= horizon:
            _, _, sid, token = heapq.heappop(heap)
            now = activity_of(sid, token)
            if now is None:
                continue
            if now > horizon:
                self.track(sid, token, now)
            else:
                self._idle[sid] = token
        found: list[tuple[str, T]] = []
        for sid, token in list(self._idle.items()):
            now = activity_of(sid, token)
            if now is None or now > horizon:
                del self._idle[sid]
                if now is not None:
                    self.track(sid, token, now)
            else:
                found.append((sid, token))
        return found
