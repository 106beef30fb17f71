"""The fan-out of one bridge process: hub, feed, LISTEN connection, live relay and the `/v1/ws` service,
with one owner.

Built after the sessions part (it tells it which sessions have subscribers, through `SubscribedSessions`);
the HTTP app mounts `service` (bridge.http.app); the live dispatch table (bridge.dispatch) hands it
`relay` and `resync`; `run()` runs in the daemon (cancel to stop). Committed batches reach the feed only
through PostgreSQL (`NOTIFY bridge_events` from the writing transaction, delivered to every process,
this one included): one path, whichever process wrote them (docs/websocket.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import load_or_create_secret
from bridge.config import Settings
from bridge.errors import SessionNotFound
from bridge.fanout.connection import FanoutService
from bridge.fanout.feed import CommitListener, DurableFeed
from bridge.fanout.hub import Hub
from bridge.fanout.queue import QueueLimits
from bridge.fanout.relay import LiveRelay, PermissionResync
from bridge.hosts import trusted_hosts
from bridge.store.fanout_store import FanoutStore
from bridge.upstream.client import UpstreamClient

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


class SubscribedSessions(Protocol):
    """What the fan-out asks of the sessions part (bridge.sessions.supervisor.FollowerSupervisor)."""

    def warm_for_subscriber(self, session_id: str) -> bool: ...
    def set_subscriber_count(self, session_id: str, count: int) -> None: ...


def _no_warming(_session_id: str) -> bool:
    return False


def auth_secret(settings: Settings) -> str:
    """The HS256 key of the WebSocket and the audit API ("" when auth is disabled): loaded once, at start."""
    log = structlog.get_logger("bridge.fanout").bind(upstream=settings.upstream_name)
    if settings.auth_disabled:
        log.warning("AUTH_DISABLED_ANY_CLIENT_CAN_READ_EVERY_SESSION", setting="BRIDGE_AUTH_DISABLED=true",
                    note="local development only")
        return ""
    if not settings.auth_secret.value:
        log.info("auth_secret_from_state_dir", path=str(settings.state_dir / "auth_secret"),
                 mint="opencode-bridge token [--session ID]... [--ttl SECONDS]")
    return load_or_create_secret(settings.auth_secret.value, settings.state_dir)


class Fanout:
    def __init__(self, settings: Settings, engine: AsyncEngine, database_url: str, *, secret: str,
                 sessions: SubscribedSessions | None = None, client: UpstreamClient | None = None,
                 read_engine: AsyncEngine | None = None) -> None:
        self.hub = Hub(on_subscribers=None if sessions is None else sessions.set_subscriber_count)
        self.store = FanoutStore(engine, settings.upstream_name, read_engine)
        self.feed = DurableFeed(self.hub, self.store)
        self.relay = LiveRelay(self.hub, self.store)
        # Without a client (unit tests) pending permissions are not re-synced after a live reconnect.
        self.resync = None if client is None else PermissionResync(self.hub, self.store, self.relay, client)
        self.listener = CommitListener(database_url, settings.upstream_name, self.feed.committed, self.feed.wake_all,
                                       on_status=self.feed.status)
        origins = frozenset(o.strip().rstrip("/") for o in settings.allowed_origins.split(",") if o.strip())
        self.service = FanoutService(
            hub=self.hub,
            store=self.store,
            upstream=settings.upstream_name,
            secret=secret,
            auth_disabled=settings.auth_disabled,
            allowed_origins=origins,
            trusted_hosts=trusted_hosts(settings.http_host, origins),
            limits=QueueLimits(settings.ws_queue_max_messages, settings.ws_queue_max_bytes),
            warm=_no_warming if sessions is None else sessions.warm_for_subscriber,
            confirm=None if client is None else upstream_confirms(client),
        )

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.feed.run(), name="fanout-feed")
            tg.create_task(self.listener.run(), name="fanout-listen")
            if self.resync is not None:
                tg.create_task(self.resync.run(), name="fanout-permission-resync")
