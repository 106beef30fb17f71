"""`ChangeFollower`: discovery on a serve that says which sessions moved — OpenCode 2.x's change hints
(docs/upstream.md §24): a `sweep` (first on every (re)connect, and whenever hints were dropped) lists every
session and warms each; a `hint` warms its session. A warm session's follower reads its log from the stored
cursor, so a hint is never more than a doorbell: nothing depends on receiving one. The stream is read again
after any break, with capped backoff; `connected` and `outage` are what `/readyz` shows for the live side.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from bridge import metrics
from bridge.backoff import Backoff
from bridge.errors import UpstreamError
from bridge.events import ChatEvent
from bridge.events.gen2 import normalize_any
from bridge.outage import OutageLog
from bridge.upstream.driver import UpstreamDriver


class Warmer(Protocol):
    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool: ...


class ChangeFollower:
    def __init__(self, driver: UpstreamDriver, warmer: Warmer, *, reconnect_min_s: float, reconnect_max_s: float,
                 upstream: str = "") -> None:
        self._driver = driver
        self._warmer = warmer
        self._backoff = Backoff(reconnect_min_s, reconnect_max_s)
        self._log = structlog.get_logger("bridge.upstream").bind(upstream=upstream)
        self.connected = asyncio.Event()
        self.outage = OutageLog(self._log, "upstream_changes")
        self.sweeps = 0

    async def run(self) -> None:
        while True:
            try:
                await self._read_once()
                cause = "eof"
            except UpstreamError as e:
                cause = "error"
                self.outage.failed(str(e))
            finally:
                self.connected.clear()
            metrics.UPSTREAM_RECONNECTS.labels(stream="changes", cause=cause).inc()
            await asyncio.sleep(self._backoff.next_delay())

    async def _read_once(self) -> None:
        async with self._driver.changes() as changes:
            self.connected.set()
            self.outage.succeeded()
            self._log.info("changes_connected")
            async for change in changes:
                if change.kind == "sweep":
                    await self.sweep()
                elif change.session_id is not None:
                    self._warmer.warm(change.session_id, reason="hint")
                self._backoff.reset()

    async def sweep(self) -> None:
        """Every session of the serve, warmed (its follower reads from its stored cursor)."""
        self.sweeps += 1
        listed = await self._driver.list_sessions()
        for s in listed:
            self._warmer.warm(s.id, s.directory, reason="sweep")
        self._log.info("changes_sweep", sessions=len(listed))


class LiveHandler(Protocol):
    """Where live-only events go (bridge.dispatch.LiveDispatch): the fan-out's relay, the sessions part."""

    async def on_live_connected(self) -> None: ...

    async def on_live_event(self, ev: ChatEvent, directory: str | None = None) -> None: ...


class LiveFollower:
    """The live-only side of a serve read through the driver port (`live()`: 2.x's `/api/event`, "volatile by
    contract"): deltas, permission requests and forms, normalized to today's kinds (bridge.events.gen2) and
    handed to the same table as 1.x's live events; durable copies there only warm their session (their log
    is followed). Read again after any break, with capped backoff."""

    def __init__(self, driver: UpstreamDriver, handler: LiveHandler, *, reconnect_min_s: float,
                 reconnect_max_s: float, upstream: str = "") -> None:
        self._driver = driver
        self._handler = handler
        self._backoff = Backoff(reconnect_min_s, reconnect_max_s)
        self._log = structlog.get_logger("bridge.upstream").bind(upstream=upstream)
        self.connections = 0

    async def run(self) -> None:
        while True:
            cause = "eof"
            try:
                async with self._driver.live() as events:
                    self.connections += 1
                    await self._handler.on_live_connected()
                    async for env in events:
                        await self._handler.on_live_event(normalize_any(env))
                        self._backoff.reset()
            except UpstreamError as e:
                cause = "error"
                self._log.info("live_reconnect", error=f"{type(e).__name__}: {e}"[:300])
            metrics.UPSTREAM_RECONNECTS.labels(stream="live", cause=cause).inc()
            await asyncio.sleep(self._backoff.next_delay())
