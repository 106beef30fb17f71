"""Polls `GET /api/session/active`, the only reliable turn-end signal (docs/upstream.md §4): every
`active_poll_s` while a session we own runs, otherwise backing off to `active_poll_idle_s`; a session
turning `running` wakes it at once. Observations feed the status machines (ActivityTracker), and a
session listed active that we do not follow is warmed (its hints may have been lost)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from bridge.errors import UpstreamError
from bridge.sessions.activity import ActivityTracker
from bridge.upstream.client import UpstreamClient


class Warmer(Protocol):
    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool: ...


class ActivePoller:
    def __init__(self, client: UpstreamClient, activity: ActivityTracker, warmer: Warmer, *,
                 poll_s: float, idle_poll_s: float, clock: Callable[[], float]) -> None:
        self._client = client
        self._activity = activity
        self._warmer = warmer
        self._poll_s = poll_s
        self._idle_poll_s = idle_poll_s
        self._clock = clock
        self._log = structlog.get_logger("bridge.supervisor")

    async def poll_once(self) -> None:
        observed_at = self._clock()  # stamped when the request starts (bridge.sessions.status_machine)
        try:
            active = set(await self._client.active())
        except UpstreamError as e:
            self._log.debug("active_poll_failed", error=str(e))
            return
        for sid in active:
            self._warmer.warm(sid, reason="active")
        self._activity.observe_active(active, observed_at)

    async def run(self) -> None:
        delay = self._poll_s
        while True:
            self._activity.clear_wake()
            await self.poll_once()
            delay = self._poll_s if self._activity.wants_polling else min(delay * 2, self._idle_poll_s)
            if await self._activity.wait_for_turn(delay):
                delay = self._poll_s
