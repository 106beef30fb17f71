"""When a session's follower keeps failing, stop retrying it: it is *parked* with a reason (pure).

A follower that crashes is restarted from the stored cursor after a capped backoff. That is right for a
passing fault, and wrong for one that belongs to the session itself (an id the database refuses, an event
that cannot be stored): it would loop forever, one traceback per attempt. So failures are counted per
warm session; `limit` of them within `window_s`, with no committed batch in between, park the session.
A failure of the environment (the database unreachable or restarting, the network) says nothing about
the session: it is retried with the backoff, never counted, since every other session sees it too.
"""

from __future__ import annotations

from collections import deque

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from bridge.errors import CursorBehind

PARK_AFTER_FAILURES = 5
PARK_WINDOW_S = 300.0

# SQLSTATE classes of a database that is away, not of a statement it refused: connection exceptions,
# insufficient resources, and the 57P0x shutdown/start-up states (57014, a cancelled statement, is not one).
_TRANSIENT_SQLSTATE = ("08", "53", "57P")


def is_transient(error: BaseException) -> bool:
    """True when the failure comes from the environment (retry, do not count it against the session)."""
    if isinstance(error, OSError | TimeoutError | PoolTimeout | CursorBehind):
        return True  # connect refused or reset, pool exhausted; commits lost by the database (failover)
    if isinstance(error, DBAPIError):
        if error.connection_invalidated:  # the connection died under the statement
            return True
        code = getattr(error.orig, "sqlstate", None)
        return isinstance(code, str) and code.startswith(_TRANSIENT_SQLSTATE)
    return False


class FailureStreak:
    """Failures of one warm session's follower since its last committed batch."""

    def __init__(self, limit: int = PARK_AFTER_FAILURES, window_s: float = PARK_WINDOW_S) -> None:
        self.limit = limit
        self.window_s = window_s
        self._times: deque[float] = deque()

    def failed(self, now: float) -> bool:
        """Record a failure; True when the session should be parked now."""
        self._times.append(now)
        while self._times and now - self._times[0] > self.window_s:
            self._times.popleft()
        return len(self._times) >= self.limit

    def succeeded(self) -> None:
        self._times.clear()

    @property
    def count(self) -> int:
        return len(self._times)

    def reason(self, error: BaseException) -> str:
        return (f"follower failed {self.count} times within {self.window_s:g} s; last error: "
                f"{type(error).__name__}: {error}")[:500]
