"""One timer for the tokens of every open `/v1/ws` socket (docs/websocket.md §1, "Revocation"; §2.2 `hello`).

A socket is closed `4402` when its token expires and `4401` within `check_s` of its token's revocation
being visible (bridge.revocation reloads the list every 5 s). One timer handle serves them all: it fires
at the earliest expiry, or at the next revocation check if that comes first; a revocation check asks once
per distinct `jti` and ends every socket of a revoked one at once. A timer per socket (a task sleeping in
5 s steps) woke 10,000 sockets every 5 s during a storm, ~11 % of the fan-out's CPU (BENCHMARKS.md,
"Subscribe storms"). No timer is armed while no socket is open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import structlog

from bridge.fanout.token_deadlines import TokenDeadlines

_log = structlog.get_logger("bridge.ws")

K = TypeVar("K", bound=Hashable)


class TokenSweep(Generic[K]):
    def __init__(self, *, revoked: Callable[[str], bool], now: Callable[[], float], check_s: float,
                 on_expired: Callable[[K], None], on_revoked: Callable[[K], None]) -> None:
        self._deadlines: TokenDeadlines[K] = TokenDeadlines()
        self._revoked = revoked
        self._now = now  # wall clock, as a token's `exp`
        self.check_s = check_s
        self._on_expired = on_expired
        self._on_revoked = on_revoked
        self._next_check: float | None = None  # wall time of the next revocation check
        self._timer: asyncio.TimerHandle | None = None
        self._armed_at = 0.0  # wall time the timer fires at

    def __len__(self) -> int:
        return len(self._deadlines)

    def add(self, key: K, jti: str, expires_at: float) -> None:
        """Watch a socket's token: `on_expired(key)` at `expires_at`, `on_revoked(key)` once revoked."""
        self._deadlines.add(key, jti, expires_at)
        if self._next_check is None:
            self._next_check = self._now() + self.check_s
        self._arm()

    def remove(self, key: K) -> None:
        """Stop watching (the socket closed); the timer stops when no socket is left."""
        self._deadlines.remove(key)
        if not self._deadlines:
            self.close()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._next_check = None

    def _due(self) -> float | None:
        expiry = self._deadlines.next_expiry()
        check = self._next_check
        if expiry is None or check is None:
            return check if expiry is None else expiry
        return min(expiry, check)

    def _arm(self) -> None:
        due = self._due()
        if due is None:
            return self.close()
        if self._timer is not None:
            if self._armed_at <= due:
                return  # fires first anyway, and re-arms then
            self._timer.cancel()
        self._armed_at = due
        self._timer = asyncio.get_running_loop().call_later(max(0.0, due - self._now()), self._fire)

    def _fire(self) -> None:
        self._timer = None
        try:
            now = self._now()
            for key in self._deadlines.expired(now):
                self._end(self._on_expired, key)
            if self._next_check is not None and now >= self._next_check:
                self._next_check = now + self.check_s
                for jti in self._deadlines.jtis():
                    if self._revoked(jti):
                        for key in self._deadlines.pop_jti(jti):
                            self._end(self._on_revoked, key)
        finally:  # whatever failed, the other sockets keep their deadlines
            self._arm()

    @staticmethod
    def _end(callback: Callable[[K], None], key: K) -> None:
        try:
            callback(key)
        except Exception as e:  # one socket's failure never spares the others due with it
            _log.error("ws_token_sweep_failed", error=f"{type(e).__name__}: {e}"[:300])
