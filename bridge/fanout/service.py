"""The fan-out of one bridge process: hub, feed, LISTEN connection, live relay and `/v1/ws`, with one owner.

The daemon creates it, hands `on_committed` to the supervisor, wraps its live handler with `tap()` (each live
(re)connect then re-syncs pending permissions, see `PermissionResync`),
mounts it on the HTTP app and runs `run()` in its task group (cancel to stop)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import structlog
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import load_or_create_secret
from bridge.config import Settings
from bridge.errors import SessionNotFound
from bridge.events import ChatEvent
from bridge.fanout.connection import FanoutService
from bridge.fanout.feed import CommitListener, DurableFeed
from bridge.fanout.hub import Hub
from bridge.fanout.queue import QueueLimits
from bridge.fanout.relay import LiveRelay, PermissionResync
from bridge.http.hosts import trusted_hosts
from bridge.store.fanout import FanoutStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.live import LiveHandler

STATIC_DIR = Path(__file__).resolve().parents[1] / "http" / "static"
CONFIRM_TIMEOUT_S = 5.0
# A "no" is remembered this long (at most this many ids): a client repeating a subscribe to an unknown
# id cannot turn the bridge into a stream of upstream requests.
UNKNOWN_TTL_S = 10.0
UNKNOWN_MAX = 1024


def upstream_confirms(client: UpstreamClient, clock: Callable[[], float] = time.monotonic
                      ) -> Callable[[str], Awaitable[bool]]:
    """`GET /api/session/{id}`: 200 yes, 404 no (docs/upstream.md §6); anything else raises, and the
    subscribe is answered `internal` (retry later) without creating anything."""
    unknown: dict[str, float] = {}

    async def confirm(session_id: str) -> bool:
        if unknown.get(session_id, 0.0) > clock():
            return False
        try:
            async with asyncio.timeout(CONFIRM_TIMEOUT_S):
                await client.get_session(session_id)
        except SessionNotFound:
            if len(unknown) >= UNKNOWN_MAX:
                unknown.clear()
            unknown[session_id] = clock() + UNKNOWN_TTL_S
            return False
        unknown.pop(session_id, None)
        return True

    return confirm


class _Tap:
    """A LiveHandler that feeds the fan-out first, then the daemon's own router."""

    def __init__(self, relay: LiveRelay, inner: LiveHandler, resync: PermissionResync | None) -> None:
        self._relay = relay
        self._inner = inner
        self._resync = resync

    async def on_live_connected(self) -> None:
        if self._resync is not None:
            self._resync.request()  # events were lost while we were away (runs in the fan-out's task)
        await self._inner.on_live_connected()

    async def on_live_event(self, ev: ChatEvent) -> None:
        await self._relay.on_live_event(ev)
        await self._inner.on_live_event(ev)


class Fanout:
    def __init__(self, settings: Settings, engine: AsyncEngine, database_url: str,
                 warm: Callable[[str], object] = lambda _sid: None,
                 on_subscribers: Callable[[str, int], None] | None = None,
                 client: UpstreamClient | None = None, read_engine: AsyncEngine | None = None) -> None:
        self.hub = Hub(on_subscribers=on_subscribers)
        self.store = FanoutStore(engine, settings.upstream_name, read_engine)
        self.feed = DurableFeed(self.hub, self.store)
        self.relay = LiveRelay(self.hub, self.store)
        # Without a client (unit tests) pending permissions are not re-synced after a live reconnect.
        self.resync = None if client is None else PermissionResync(self.hub, self.store, self.relay, client)
        self.listener = CommitListener(database_url, settings.upstream_name, self.feed.committed, self.feed.wake_all,
                                       on_status=self.feed.status)
        self._log = structlog.get_logger("bridge.fanout").bind(upstream=settings.upstream_name)
        origins = frozenset(o.strip().rstrip("/") for o in settings.allowed_origins.split(",") if o.strip())
        secret = "" if settings.auth_disabled else load_or_create_secret(settings.auth_secret.value, settings.state_dir)
        self.service = FanoutService(
            hub=self.hub,
            store=self.store,
            upstream=settings.upstream_name,
            secret=secret,
            auth_disabled=settings.auth_disabled,
            allowed_origins=origins,
            trusted_hosts=trusted_hosts(settings.http_host, origins),
            limits=QueueLimits(settings.ws_queue_max_messages, settings.ws_queue_max_bytes),
            warm=warm,
            confirm=None if client is None else upstream_confirms(client),
        )
        if not settings.auth_disabled and not settings.auth_secret.value:
            self._log.info("auth_secret_from_state_dir", path=str(settings.state_dir / "auth_secret"),
                           mint="opencode-bridge token [--session ID]... [--ttl SECONDS]")
        if settings.auth_disabled:
            self._log.warning("AUTH_DISABLED_ANY_CLIENT_CAN_READ_EVERY_SESSION",
                              setting="BRIDGE_AUTH_DISABLED=true", note="local development only")

    def mount(self, app: web.Application) -> web.Application:
        """`/v1/ws`, and the viewer at `/` (static files under `/static/`)."""
        from bridge.http.ws import add_websocket

        add_websocket(app, self.service)
        index = STATIC_DIR / "index.html"
        if index.is_file():

            async def viewer(_request: web.Request) -> web.FileResponse:
                return web.FileResponse(index)

            app.router.add_get("/", viewer)
            app.router.add_static("/static/", STATIC_DIR)
        return app

    def tap(self, inner: LiveHandler) -> LiveHandler:
        return _Tap(self.relay, inner, self.resync)

    def on_committed(self, session_id: str, events: Sequence[ChatEvent]) -> None:
        """The supervisor's callback after each committed batch (non-blocking)."""
        seqs = [e.seq for e in events if e.seq is not None]
        if seqs:
            self.feed.committed(session_id, max(seqs))

    async def on_live_event(self, ev: ChatEvent) -> None:
        await self.relay.on_live_event(ev)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.feed.run(), name="fanout-feed")
            tg.create_task(self.listener.run(), name="fanout-listen")
            if self.resync is not None:
                tg.create_task(self.resync.run(), name="fanout-permission-resync")
