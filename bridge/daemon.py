"""`opencode-bridge run`: the composition root. `Daemon.run` reads top to bottom as the start order;
the parts are torn down in the reverse order (an AsyncExitStack):

0. the serve's OpenCode generation (bridge.ops.upstream_generation): one that no driver of this build
   fits stops start-up with one line, before anything else is touched;
1. the database (the writers' pool, a small pool of its own for heartbeats and the hand-off, and the
   bounded read pool of WebSocket replay and the audit API: docs/operations.md "Limits"; with
   BRIDGE_READ_DATABASE_URL a second one on the standby: docs/scaling.md), migrated;
2. the upstream client and the auth secret (loaded once);
3. the parts, built in dependency order, each handed only parts that exist already: sessions → fan-out
   (tells the sessions which have subscribers) → discovery → the live stream with its one dispatch table
   (bridge.dispatch) → the HTTP app (bridge.http.app);
4. HTTP bound: `/readyz` says "not started" until start-up is over; closed last but for the clients;
5. the sessions started (followers, heartbeat, sweep, poller, status writer); on the way out every
   follower stops and the leases are handed off to peers;
6. the fan-out (feed, LISTEN, pending-request re-sync), discovery, the live stream, the pending-request
   gauges, the health task; READY=1.

Every background task has an owner that starts, watches and stops it: a crash of one cancels the daemon,
which then stops the others in order.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, NamedTuple

import structlog
from aiohttp import web

from bridge import metrics
from bridge.command_service.door import build_door
from bridge.command_service.legacy_queue import QueueSender
from bridge.config import Settings
from bridge.dispatch import LiveDispatch
from bridge.events.legacy_shapes import SessionStatus
from bridge.fanout.service import FanoutHooks, FanoutPart, ReadEngines, auth_secret, print_local_token
from bridge.http.app import build_app, serving
from bridge.http.audit import AuditContext
from bridge.http.commands import CommandsContext, add_command_routes
from bridge.http.session_state import add_session_state_routes
from bridge.lease import claim_delay
from bridge.ops.pending import PendingGauges
from bridge.ops.readiness import LiveSource, health_monitor, readiness_check, readiness_detail, status_line
from bridge.ops.sdnotify import Notifier
from bridge.ops.upstream_generation import GenerationGuard, UpstreamRefused, generation_check, startup_choice
from bridge.perf.runtime import refreeze, tune_gc
from bridge.perf.turnstile import Turnstile
from bridge.revocation import RevocationList
from bridge.sessions.changes import ChangeFollower, LiveFollower
from bridge.sessions.discovery import Discovery
from bridge.sessions.session_run import FollowerFactory
from bridge.sessions.supervisor import FollowerSupervisor, SessionHooks
from bridge.store.chat_sessions import LeaseStore
from bridge.store.db import Engines, process_engines, upgrade_to_head
from bridge.store.partitions import PartitionKeeper
from bridge.store.reads import AuditReader
from bridge.store.revoked import revoked_jtis
from bridge.store.writes import EventStore
from bridge.upstream.client import ClientLimits, UpstreamClient
from bridge.upstream.gen2.driver import Gen2Driver
from bridge.upstream.gen2.requests import Gen2Requests
from bridge.upstream.live import LiveStream
from bridge.upstream.port_follower import PortFollower, PortHooks, PortSettings
from bridge.upstream.sync_batch import BatchSettings
from bridge.workers.child import WorkerContext


def new_incarnation_id() -> str:
    """Unique per process start, never reused (even by the same host and pid)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


PartRun = Callable[[], Coroutine[Any, Any, None]]
Revoked = Callable[[str], bool]


class _Parts(NamedTuple):
    store: EventStore
    sessions: FollowerSupervisor
    fanout: FanoutPart
    app: web.Application
    queue: QueueSender
    upstream_tasks: list[tuple[str, PartRun]]
    secret: str


@asynccontextmanager
async def _background(name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> AsyncIterator[None]:
    """`run()` as a task while the block runs, cancelled on the way out; its crash cancels the block."""
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(run(), name=name)
        try:
            yield
        finally:
            task.cancel()


class Daemon:
    def __init__(self, settings: Settings, database_url: str, worker: WorkerContext | None = None) -> None:
        self.settings = settings
        self.database_url = database_url
        # One of BRIDGE_WORKERS processes (bridge.workers): the parent's sockets and `/global/event` tee.
        self._worker = worker
        self.owner = new_incarnation_id()
        self._stop = asyncio.Event()
        self._started = False
        self._refusal: str | None = None
        self._log = structlog.get_logger("bridge.daemon").bind(upstream=settings.upstream_name)

    def request_stop(self) -> None:
        self._stop.set()

    def started(self) -> bool:
        return self._started

    def refuse(self, line: str) -> None:
        """The serve turned out to be of a generation no running driver fits: stop, and say so."""
        self._log.error("upstream_refused", reason=line)
        self._refusal = line
        self._stop.set()

    async def run(self) -> int:
        try:
            return await self._run()
        except UpstreamRefused:
            raise  # one line, printed by the CLI: no traceback
        except Exception:
            # A part crashed (its task group cancelled the rest, which then stopped in order): say which, as
            # one structured line in the journal, before the traceback ends the process.
            self._started = False
            self._log.exception("bridge_crashed")
            raise

    async def _run(self) -> int:
        s = self.settings
        # Before anything that can die is built: what is frozen is never collected (bridge.perf.runtime).
        tune_gc()
        choice, recognition = await startup_choice(s)  # raises UpstreamRefused
        self._log.info("upstream_generation", recognised=recognition.describe(), driver=choice.generation)
        assert choice.generation is not None
        async with AsyncExitStack() as stack:
            db = await stack.enter_async_context(process_engines(
                self.database_url, s.read_database_url.value, read_pool_size=s.read_pool_size,
                read_statement_timeout_s=s.read_statement_timeout_s))
            await upgrade_to_head(db.main)
            partitions = PartitionKeeper(db.main)  # today's and the next days' (docs/lifecycle.md, "Partitions")
            await partitions.ensure()
            await stack.enter_async_context(_background("partitions", partitions.run))
            client = await stack.enter_async_context(
                UpstreamClient(s.upstream_url, s.upstream_username, s.upstream_password.value,
                               limits=ClientLimits(sync_batch=BatchSettings(items_per_s=s.sync_items_per_s))))
            # A worker reads `/global/event` from its parent, which reads it once for the host (bridge.workers).
            live_client = client if self._worker is None else await stack.enter_async_context(
                self._worker.live_client())
            # Revoked tokens (docs/security.md): loaded before the first request, reloaded every few seconds.
            revocations = RevocationList(lambda: revoked_jtis(db.main))
            await revocations.refresh()
            parts = self._parts(choice.generation, db, client, revocations.revoked, live_client)
            await self._start(stack, parts, revocations.run)
            notifier = Notifier.from_env()
            # The watchdog's database probe shares the heartbeats' pool: a burst of write batches on the
            # main pool must not withhold the watchdog (and have systemd restart a busy bridge).
            health = health_monitor(notifier, db.liveness, parts.sessions)
            await stack.enter_async_context(_background("health", health.run))
            if not choice.settled:  # the serve did not answer at start: asked again until it does
                guard = GenerationGuard(client, s, choice.generation, self.refuse)
                await stack.enter_async_context(_background("generation-guard", guard.run))

            self._started = True
            self._log.info("bridge_started", warm=len(parts.sessions.warm_sessions()))
            notifier.ready(status_line(parts.sessions))  # database at head, HTTP bound, every part running
            await self._stop.wait()
            self._log.info("bridge_stopping")
            self._started = False
            notifier.stopping()
        self._log.info("bridge_stopped")
        if self._refusal is not None:
            raise UpstreamRefused(self._refusal)
        return 0

    def _parts(self, generation: int, db: Engines, client: UpstreamClient, revoked: Revoked,
               live_client: UpstreamClient) -> _Parts:
        """Every part, built in start order (nothing runs yet)."""
        s = self.settings
        # BRIDGE_AUTH_DISABLED=true with workers: the parent's per-start secret, so a token works on each.
        secret = (self._worker.local_secret if self._worker is not None and s.auth_disabled else "") or auth_secret(s)
        store = EventStore(db.main, s.upstream_name)
        driver = Gen2Driver(client) if generation == 2 else None
        # One turnstile for every follower: a burst of reads is spread over loop turns (bridge.perf.turnstile).
        # The bridge's own legacy queue (docs/commands.md, "The legacy queue"): its sender, built below, is
        # woken when a session of ours goes idle upstream.
        sessions = FollowerSupervisor(store, client, s, self.owner,
                                      leases=LeaseStore(db.main, s.upstream_name, db.liveness),
                                      hooks=SessionHooks(turnstile=Turnstile(), on_idle=lambda sid: queue.wake(sid),
                                                         followers=None if driver is None
                                                         else self._gen2_followers(driver, lambda: sessions),
                                                         claim_delay=self._claim_delay()))
        # The command door (docs/commands.md): its adapters are the /v1 routes and the WebSocket `command` op.
        door = CommandsContext(build_door(s, db.main, client, generation), secret, revoked=revoked)
        fanout = FanoutPart(s, db.main, self.database_url, secret=secret, client=client, revoked=revoked,
                            reads=ReadEngines(db.read, db.standby),
                            hooks=FanoutHooks(sessions=sessions, warm_sessions=sessions.warm_sessions,
                                              on_database_back=sessions.database_back,
                                              on_request=sessions.activity.request_changed,
                                              commands=door.run, widen=door.service.widen,
                                              requests=None if driver is None else Gen2Requests(client)))
        live, upstream_tasks = self._upstream_parts(driver, client, store, sessions, fanout, live_client=live_client)
        whole = self._worker.set_view() if self._worker is not None else None  # a worker answers for its set
        app = build_app(readiness_check(db.main, client, live, sessions, self.started,
                                        generation=generation_check(client, generation),
                                        workers=whole.readiness if whole else None),
                        websocket=fanout.service,
                        audit=AuditContext(AuditReader(db.standby or db.read, s.upstream_name), secret,
                                           revoked=revoked),
                        detail=readiness_detail(secret, s, revoked), trusted_proxies=s.proxy_networks,
                        worker_set=whole)
        add_command_routes(app, door)
        queue = QueueSender(door.service.prompts, sessions)
        # todo list and diff summary kept by the fan-out, session errors (docs/commands.md "Session state")
        add_session_state_routes(app, fanout.relay.state, fanout.relay.errors)
        return _Parts(store, sessions, fanout, app, queue, upstream_tasks, secret)

    async def _start(self, stack: AsyncExitStack, parts: _Parts, revocations: PartRun) -> None:
        """Every part started in order (each stops in reverse as the stack unwinds)."""
        s = self.settings
        await stack.enter_async_context(serving(parts.app, s.http_host, s.http_port,
                                                max_connections=s.http_max_connections,
                                                sockets=self._worker.sockets() if self._worker else ()))
        self._log.info("http_listening", host=s.http_host, port=s.http_port, owner=self.owner)
        if s.auth_disabled and (self._worker is None or self._worker.index == 0):
            print_local_token(s, parts.secret)
        await stack.enter_async_context(_background("revocation", revocations))
        # The warm heap frozen as it grows, collected whole now and then (bridge.perf.runtime).
        collected = metrics.GC_FULL_COLLECT_SECONDS.observe
        churn = parts.sessions.registry.churn  # stopped followers so far, warm now: a full collection under churn
        await stack.enter_async_context(_background("gc-refreeze", lambda: refreeze(collected, churn=churn)))
        # Group commit across sessions (docs/mirror.md): entered before the followers start, so it
        # stops after them and commits what they queued.
        await stack.enter_async_context(parts.store.group_commit())
        await stack.enter_async_context(parts.sessions.started())
        await stack.enter_async_context(_background("fanout", parts.fanout.run))
        for name, task in parts.upstream_tasks:  # discovery and the live side of this generation's driver
            await stack.enter_async_context(_background(name, task))
        pending = PendingGauges(parts.fanout.relay.pending)
        await stack.enter_async_context(_background("pending-gauges", pending.run))
        await stack.enter_async_context(_background("prompt-queue", parts.queue.run))

    def _claim_delay(self) -> Callable[[str], float] | None:
        """One of a host's workers: each session claimed first by its home worker (bridge.lease.claim_delay)."""
        w = self._worker
        if w is None or w.count <= 1:
            return None
        return lambda sid: claim_delay(sid, w.index, w.count)

    def _gen2_followers(self, driver: Gen2Driver, sessions: Callable[[], FollowerSupervisor]) -> FollowerFactory:
        """Each session's log followed through the 2.x driver (docs/upstream.md §24). Turn end is an event on
        2.x (session.execution.*): busy → running; idle wakes the poller, whose /api/session/active answer ends
        the turn, as a 1.x `session.status` does."""
        s = self.settings

        def on_turn(sid: str, busy: bool) -> None:
            sessions().upstream_status(sid, SessionStatus("busy" if busy else "idle"))

        return lambda sid, sink, cursor, committed: PortFollower(
            driver, sid, sink, cursor, PortSettings(s.reconnect_min_s, s.reconnect_max_s),
            PortHooks(on_committed=committed, on_turn=on_turn))

    def _upstream_parts(self, driver: Gen2Driver | None, client: UpstreamClient, store: EventStore,
                        sessions: FollowerSupervisor,
                        fanout: FanoutPart, *, live_client: UpstreamClient
                        ) -> tuple[LiveSource, list[tuple[str, PartRun]]]:
        """Discovery and the live side for the serve's generation: on 1.x the one `/global/event` reader
        with its dispatch table and the sync-log discovery; on 2.x (docs/upstream.md §24, written from its
        source) each session's log followed through the 2.x driver and the change hints."""
        s = self.settings
        if driver is not None:
            changes = ChangeFollower(driver, sessions, reconnect_min_s=s.reconnect_min_s,
                                     reconnect_max_s=s.reconnect_max_s, upstream=s.upstream_name)
            self._log.warning("upstream_driver_unverified", generation=2,
                              detail="the OpenCode 2.x driver is written from its source, not verified on a 2.x "
                                     "serve (docs/upstream.md §24)")
            # Deltas, permission requests and forms: the same table as 1.x's live events (without the
            # sync-log discovery); pending requests re-read from 2.x's list routes on every (re)connect (the
            # fan-out's re-sync was given them at construction, FanoutHooks.requests).
            live2 = LiveFollower(driver, LiveDispatch(relay=fanout.relay, resync=fanout.resync, sessions=sessions),
                                 reconnect_min_s=s.reconnect_min_s, reconnect_max_s=s.reconnect_max_s,
                                 upstream=s.upstream_name)
            return changes, [("changes", changes.run), ("live", live2.run)]
        discovery = Discovery(client, store, sessions, min_interval_s=s.discovery_interval_s,
                              retry_min_s=s.reconnect_min_s, retry_max_s=s.reconnect_max_s)
        dispatch = LiveDispatch(relay=fanout.relay, resync=fanout.resync, sessions=sessions, discovery=discovery)
        live = LiveStream(live_client, dispatch, heartbeat_timeout_s=s.live_heartbeat_timeout_s,
                          reconnect_min_s=s.reconnect_min_s, reconnect_max_s=s.reconnect_max_s,
                          upstream=s.upstream_name)
        return live, [("discovery", discovery.run), ("live", live.run)]


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
