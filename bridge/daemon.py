"""`opencode-bridge run`: wires config, database, upstream streams, followers and HTTP together.

Every background task has an owner: the daemon's TaskGroup holds the live reader, the discovery loop
and the supervisor (which holds the followers). Shutdown is ordered: stop discovery and the live
reader, stop followers (they give their leases back), close the HTTP site, dispose the engine.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web
from sqlalchemy import text

from bridge.config import Settings
from bridge.events import ChatEvent
from bridge.fanout.service import Fanout
from bridge.http.app import build_app, coalesced
from bridge.http.commands import mount_commands
from bridge.http.hosts import trusted_hosts
from bridge.http.security import protect, token_holder
from bridge.http.server import make_runner
from bridge.ops.health import HealthMonitor
from bridge.ops.outage import OutageLog
from bridge.ops.sdnotify import Notifier
from bridge.ops.status import StatusSummary
from bridge.sessions.discovery import run_coalesced, sessions_to_warm
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.db import make_engine, make_read_engine, schema_is_at_head, upgrade_to_head
from bridge.store.events_store import EventStore
from bridge.store.leases import LeaseStore
from bridge.upstream.backoff import Backoff
from bridge.upstream.client import Unauthorized, UpstreamClient, UpstreamError
from bridge.upstream.live import LiveStream


def new_incarnation_id() -> str:
    """Unique per process start, never reused (even by the same host and pid)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class _LiveRouter:
    """Turns /api/event traffic into supervisor commands (hints only; never stored as truth)."""

    def __init__(self, supervisor: FollowerSupervisor, resync: asyncio.Event) -> None:
        self._sup = supervisor
        self._resync = resync

    async def on_live_connected(self) -> None:
        # Hints may have been lost while we were disconnected: list sessions again.
        self._resync.set()

    async def on_live_event(self, ev: ChatEvent) -> None:
        sid = ev.envelope.session_id
        if not sid:
            return
        if ev.kind == "session:deleted":
            await self._sup.deleted(sid)
            return
        loc = ev.envelope.raw.get("location")
        directory = loc.get("directory") if isinstance(loc, dict) else None
        self._sup.warm(sid, directory if isinstance(directory, str) else None, reason=ev.type)
        # Only v2 events reach the durable stream; legacy writes burn seqs without being delivered
        # there (PROTOCOL.md §3.1), so they must not arm the stall watchdog.
        if ev.seq is not None and ev.type.startswith("session.next."):
            self._sup.notify_seen(sid, ev.seq)
        elif ev.seq and ev.type in ("session.updated", "message.updated", "message.part.updated"):
            self._sup.notify_legacy_seq(sid, ev.seq)  # a legacy-driven turn: the mirror is incomplete


class Daemon:
    def __init__(self, settings: Settings, database_url: str) -> None:
        self.settings = settings
        self.database_url = database_url
        self.owner = new_incarnation_id()
        self._stop = asyncio.Event()
        self._started = False
        self._log = structlog.get_logger("bridge.daemon").bind(upstream=settings.upstream_name)

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> int:
        s = self.settings
        engine = make_engine(self.database_url)
        # Heartbeats and hand-off get a pool of their own: never queued behind a burst of write batches.
        liveness_engine = make_engine(self.database_url, pool_size=1, max_overflow=1)
        # WebSocket replay and the audit API read through their own small pool with a statement timeout.
        read_engine = make_read_engine(self.database_url, pool_size=s.read_pool_size,
                                       statement_timeout_s=s.read_statement_timeout_s)
        try:
            await upgrade_to_head(engine)
            store = EventStore(engine, s.upstream_name)
            async with UpstreamClient(s.upstream_url, s.upstream_username, s.upstream_password.value) as client:
                # WebSocket fan-out (#3): warms a session a client subscribes to; committed batches wake it.
                fanout = Fanout(s, engine, self.database_url,
                                warm=lambda sid: supervisor.warm(sid, reason="subscriber"),
                                on_subscribers=lambda sid, n: supervisor.set_subscriber_count(sid, n),
                                client=client, read_engine=read_engine)
                # Statuses reach subscribers through PostgreSQL (NOTIFY bridge_status in the writing
                # transaction), from whichever process holds the session: no local shortcut, one order.
                supervisor = FollowerSupervisor(store, client, s, self.owner, on_committed=fanout.on_committed,
                                                leases=LeaseStore(engine, s.upstream_name, liveness_engine))
                resync = asyncio.Event()
                live = LiveStream(
                    client,
                    fanout.tap(_LiveRouter(supervisor, resync)),
                    heartbeat_timeout_s=s.live_heartbeat_timeout_s,
                    reconnect_min_s=s.reconnect_min_s,
                    reconnect_max_s=s.reconnect_max_s,
                    upstream=s.upstream_name,
                )

                async def dependencies() -> dict[str, Any]:
                    checks: dict[str, Any] = {}
                    try:
                        async with engine.connect() as conn:
                            await conn.execute(text("select 1"))
                        checks["database"] = {"ok": True}
                        checks["migrations"] = {"ok": await schema_is_at_head(engine)}
                    except Exception as e:
                        checks["database"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
                    checks["upstream_auth"] = await _upstream_auth_check(client)
                    return checks

                # The database and the upstream are asked at most once a second, whatever the probe rate;
                # the in-process facts (started/stopping, live stream, followers) are always fresh.
                shared_dependencies = coalesced(dependencies, 1.0)

                async def readiness() -> dict[str, Any]:
                    checks: dict[str, Any] = {"started": {"ok": self._started}}
                    checks.update(await shared_dependencies())
                    checks["upstream_live"] = {"ok": live.connected.is_set(), **live.outage.status()}
                    checks["followers"] = {"ok": supervisor.running, "warm": len(supervisor.warm_sessions())}
                    return checks

                app = fanout.mount(_with_audit(build_app(readiness, _readiness_detail(s)), s, read_engine))
                mount_commands(app, s, engine, client, fanout.service)  # docs/commands.md
                protect(app, trusted_hosts=trusted_hosts(s.http_host, fanout.service.allowed_origins)
                        if s.auth_disabled else None)
                runner = make_runner(app, max_connections=s.http_max_connections)
                await runner.setup()
                site = web.TCPSite(runner, s.http_host, s.http_port)
                await site.start()
                self._log.info("http_listening", host=s.http_host, port=s.http_port, owner=self.owner)
                notifier = Notifier.from_env()
                health = _health_monitor(notifier, engine, supervisor)
                try:
                    async with asyncio.TaskGroup() as tg:
                        tg.create_task(supervisor.run(), name="supervisor")
                        await asyncio.sleep(0)  # let the supervisor open its task group
                        for row in await store.sessions(include_deleted=True):
                            if row.deleted:
                                supervisor.forget_deleted({row.session_id})
                        live_task = tg.create_task(live.run(), name="live")
                        disc_task = tg.create_task(self._discovery(client, supervisor, store, resync), name="discovery")
                        fanout_task = tg.create_task(fanout.run(), name="fanout")
                        health_task = tg.create_task(health.run(), name="health")
                        self._started = True
                        self._log.info("bridge_started", warm=len(supervisor.warm_sessions()))
                        # Database reachable, migrations at head (upgrade_to_head above), HTTP bound.
                        notifier.ready(_status_line(supervisor))
                        await self._stop.wait()
                        self._log.info("bridge_stopping")
                        self._started = False
                        notifier.stopping()
                        health_task.cancel()
                        live_task.cancel()
                        disc_task.cancel()
                        fanout_task.cancel()
                        supervisor.stop()
                finally:
                    await runner.cleanup()
        finally:
            await engine.dispose()
            await liveness_engine.dispose()
            await read_engine.dispose()
        self._log.info("bridge_stopped")
        return 0

    async def _discovery(
        self, client: UpstreamClient, sup: FollowerSupervisor, store: EventStore, resync: asyncio.Event
    ) -> None:
        """At start and after live reconnects (at most once per BRIDGE_DISCOVERY_INTERVAL_S), warm the
        sessions that have something new."""
        backoff = Backoff(self.settings.reconnect_min_s, self.settings.reconnect_max_s)
        outage = OutageLog(self._log, "upstream_discovery")  # logged when lost and back, not per retry

        async def once() -> bool:
            try:
                found = await sessions_to_warm(client, store)
            except UpstreamError as e:
                outage.failed(str(e))
                return False
            outage.succeeded()
            for c in found:
                sup.warm(c.session_id, c.directory, reason=c.reason)
            self._log.info("session_discovery", warmed=len(found))
            return True

        def retry_delay(succeeded: bool) -> float:
            if succeeded:
                backoff.reset()
                return 0.0
            return backoff.next_delay()

        resync.set()
        await run_coalesced(resync, once, self.settings.discovery_interval_s, retry_delay)


def _with_audit(app: web.Application, settings: Settings, engine: Any) -> web.Application:
    """The read-only audit API (/v1/...), behind the same tokens as the WebSocket (issue #5)."""
    from bridge.auth import load_or_create_secret
    from bridge.http.audit import AuditContext, add_audit_routes
    from bridge.store.audit import AuditReader

    secret = "" if settings.auth_disabled else load_or_create_secret(settings.auth_secret.value, settings.state_dir)
    add_audit_routes(app, AuditContext(AuditReader(engine, settings.upstream_name), secret, settings.auth_disabled))
    return app


def _readiness_detail(settings: Settings) -> Callable[[web.Request], bool]:
    """Who sees /readyz error texts (hosts, users): a valid token's holder; everyone with auth off."""
    if settings.auth_disabled:
        return lambda _request: True
    from bridge.auth import load_or_create_secret

    return token_holder(load_or_create_secret(settings.auth_secret.value, settings.state_dir),
                        settings.upstream_name)


async def _upstream_auth_check(client: UpstreamClient) -> dict[str, Any]:
    """Reachable and authenticated: `/api/health` needs the basic-auth password too (PROTOCOL.md §8)."""
    try:
        async with asyncio.timeout(3.0):
            await client.health()
    except Unauthorized as e:
        return {"ok": False, "error": str(e)[:300], "authenticated": False}
    except (UpstreamError, TimeoutError) as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
    return {"ok": True}


def _status_line(supervisor: FollowerSupervisor) -> str:
    return f"following {len(supervisor.warm_sessions())} sessions"


def _status_summary(supervisor: FollowerSupervisor) -> StatusSummary:
    return StatusSummary(lambda: len(supervisor.warm_sessions()))


def _health_monitor(notifier: Notifier, engine: Any, supervisor: FollowerSupervisor) -> HealthMonitor:
    async def database_probe() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("select 1"))

    # Ping at half of WatchdogSec; without a watchdog still tick for STATUS= and the loop-lag metric.
    interval = notifier.watchdog_interval_s or 5.0
    return HealthMonitor(
        notifier,
        database_probe=database_probe,
        supervisor_alive=lambda: supervisor.running,
        status_line=_status_summary(supervisor),
        interval_s=interval,
        max_loop_lag_s=min(1.0, interval),
        probe_timeout_s=min(5.0, interval),
    )


def install_signal_handlers(daemon: Daemon) -> None:
    loop = asyncio.get_running_loop()
    count = 0

    def on_signal(signame: str) -> None:
        nonlocal count
        count += 1
        if count > 1:
            os._exit(1)  # second signal: exit at once
        structlog.get_logger("bridge.daemon").info("signal_received", signal=signame)
        daemon.request_stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    # Nothing is reloadable in place (settings are validated once; logs go to stdout/journald): SIGHUP
    # is logged and ignored instead of killing the process (its default action). Restart to reconfigure.
    loop.add_signal_handler(
        signal.SIGHUP, lambda: structlog.get_logger("bridge.daemon").warning("sighup_ignored", hint="restart to reload")
    )
