"""The fan-out of one bridge process: hub, feed, LISTEN connection, live relay and the `/v1/ws` service,
with one owner.

Built after the sessions part (it tells it which sessions have subscribers, through `SubscribedSessions`);
the HTTP app mounts `service` (bridge.http.app); the live dispatch table (bridge.dispatch) hands it
`relay` and `resync`; `run()` runs in the daemon (cancel to stop). Committed batches reach the feed only
through PostgreSQL (`NOTIFY bridge_events` from the writing transaction, delivered to every process,
this one included): one path, whichever process wrote them (docs/websocket.md)."""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import Claims, load_or_create_secret, mint_token
from bridge.command_service import Outcome
from bridge.config import Settings
from bridge.errors import SessionNotFound
from bridge.events.pending import RequestChange
from bridge.fanout.connection import WebSocketContext
from bridge.fanout.feed import CommitListener, DurableFeed
from bridge.fanout.frames import command_message
from bridge.fanout.hub import Hub
from bridge.fanout.limits import HEALTH_RESERVE, ConnectionSlots
from bridge.fanout.queue import QueueLimits
from bridge.fanout.relay import LiveRelay
from bridge.fanout.resync import RequestResync
from bridge.fanout.state_resync import StateResync
from bridge.hosts import trusted_hosts
from bridge.revocation import never_revoked
from bridge.store.notices import CommandNotice
from bridge.store.reads import FanoutStore
from bridge.store.session_errors import SessionErrorStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.requests import UpstreamRequests

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
    """The HS256 key of the WebSocket, the commands and the audit API: loaded once, at start. With
    BRIDGE_AUTH_DISABLED=true a random key of this process only (never written anywhere): the daemon
    prints a token for it on the console, as Jupyter does (docs/security.md, "Local development")."""
    log = structlog.get_logger("bridge.fanout").bind(upstream=settings.upstream_name)
    if settings.auth_disabled:
        log.warning("AUTH_PER_START_TOKEN", setting="BRIDGE_AUTH_DISABLED=true",
                    note="local development only: a random secret for this process, a token on the console")
        return secrets.token_urlsafe(48)
    if not settings.auth_secret.value:
        log.info("auth_secret_from_state_dir", path=str(settings.state_dir / "auth_secret"),
                 mint="opencode-bridge token [--session ID]... [--ttl SECONDS]")
    return load_or_create_secret(settings.auth_secret.value, settings.state_dir)


def ws_total(http_max_connections: int) -> int:
    """WebSockets open at once: the HTTP cap less a reserve for probes and plain requests (at least 1 each)."""
    return max(1, http_max_connections - max(1, int(http_max_connections * HEALTH_RESERVE)))


LOCAL_TOKEN_TTL_S = 30 * 86400.0  # the per-start secret dies with the process anyway


def print_local_token(settings: Settings, secret: str) -> str:
    """BRIDGE_AUTH_DISABLED=true: a control token (approve always, every session) for this process's
    secret, printed on the console with the viewer's address, as Jupyter prints its URL. Never logged."""
    token = mint_token(secret, settings.upstream_name, None, LOCAL_TOKEN_TTL_S, "local-developer", scope="control",
                       approve="always")
    host = settings.http_host if ":" not in settings.http_host else f"[{settings.http_host}]"
    print(f"\nopencode-bridge: auth is in local mode (BRIDGE_AUTH_DISABLED=true). Token for this run only:\n"
          f"    http://{host}:{settings.http_port}/?token={token}\n"
          f"  (Authorization: Bearer <token> for /v1 requests; a new one at every start)\n",
          file=sys.stderr, flush=True)
    structlog.get_logger("bridge.fanout").info("local_token_printed", stream="stderr")
    return token


@dataclass(frozen=True)
class ReadEngines:
    """The pools the fan-out reads from besides the writers' (None: the writers' pool): the read pool of
    replays and the feed, and a standby's for the listings (docs/scaling.md)."""

    read: AsyncEngine | None = None
    standby: AsyncEngine | None = None


@dataclass(frozen=True)
class FanoutHooks:
    """What the fan-out calls in the other parts of the process, each optional (a fan-out alone in tests)."""

    sessions: SubscribedSessions | None = None  # warms a subscribed session, hears the subscriber counts
    warm_sessions: Callable[[], Iterable[str]] | None = None  # the sessions warm here (request re-sync)
    on_database_back: Callable[[], None] | None = None  # the LISTEN connection is back
    on_request: Callable[[RequestChange], None] | None = None  # the status machines (`waiting`)
    # The `command` op (docs/commands.md): the command door (bridge.http.commands.CommandsContext.run)
    commands: Callable[..., Awaitable[Outcome]] | None = None
    widen: Callable[[Claims, str], Awaitable[Claims]] | None = None  # a parent's token grants its subagents'
    # The pending requests' list routes of the serve's generation (2.x: docs/upstream.md §24); None: 1.x's.
    requests: UpstreamRequests | None = None


class FanoutPart:
    """The fan-out part of one bridge process (the daemon builds it after the sessions part): its hub, feed,
    LISTEN connection, live relay, request re-sync and the `WebSocketContext` the `/v1/ws` route serves."""

    def __init__(self, settings: Settings, engine: AsyncEngine, database_url: str, *, secret: str,
                 client: UpstreamClient | None = None, revoked: Callable[[str], bool] = never_revoked,
                 reads: ReadEngines = ReadEngines(), hooks: FanoutHooks = FanoutHooks()) -> None:
        sessions, on_request = hooks.sessions, hooks.on_request
        self.hub = Hub(on_subscribers=None if sessions is None else sessions.set_subscriber_count,
                       wake=lambda sid: self.feed.wake(sid))
        self.store = FanoutStore(engine, settings.upstream_name, reads.read, reads.standby)
        self.feed = DurableFeed(self.hub, self.store)
        # session-level errors recorded for the audit (docs/audit.md "Session errors")
        self.relay = LiveRelay(self.hub, self.store,
                               errors=SessionErrorStore(engine, settings.upstream_name, reads.read),
                               # the sessions part's status machines (`waiting`, docs/lifecycle.md)
                               on_request=() if on_request is None else (on_request,))
        # Without a client (unit tests) pending permissions are not re-synced after a live reconnect.
        self.resync = None if client is None else RequestResync(
            self.hub, self.store, self.relay, client, warm=hooks.warm_sessions,
            state=StateResync(self.relay.state, self.hub, client, self.relay.pending.directories),
            requests=hooks.requests)
        self.listener = CommitListener(database_url, settings.upstream_name, self.feed.committed, self.feed.wake_all,
                                       on_status=self.feed.status, on_reconnected=hooks.on_database_back,
                                       on_command=self._command_notice)
        origins = frozenset(o.strip().rstrip("/") for o in settings.allowed_origins.split(",") if o.strip())
        self.service = WebSocketContext(
            hub=self.hub,
            store=self.store,
            upstream=settings.upstream_name,
            secret=secret,
            allowed_origins=origins,
            trusted_hosts=trusted_hosts(settings.http_host, origins, settings.allowed_hosts.split(",")),
            revoked=revoked,
            slots=ConnectionSlots(settings.ws_max_per_token, settings.ws_max_per_address,
                                  ws_total(settings.http_max_connections)),
            limits=QueueLimits(settings.ws_queue_max_messages, settings.ws_queue_max_bytes),
            warm=_no_warming if sessions is None else sessions.warm_for_subscriber,
            confirm=None if client is None else upstream_confirms(client),
            resync_session=None if self.resync is None else self.resync.request_session,
            # Subscribes' reads take turns on the read pool, one connection left for the live feed.
            read_slots=max(1, settings.read_pool_size - 1),
            commands=hooks.commands,
            widen=hooks.widen,
        )

    def _command_notice(self, notice: CommandNotice) -> None:
        """A prompt row's state (`NOTIFY`, the legacy queue) to the session's pages."""
        self.hub.publish_state(notice.session_id, command_message(notice))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.feed.run(), name="fanout-feed")
            tg.create_task(self.listener.run(), name="fanout-listen")
            if self.resync is not None:
                tg.create_task(self.resync.run(), name="fanout-request-resync")
