"""The bridge's HTTP app, assembled in one place: `/livez`, `/readyz`, `/metrics`, the WebSocket
`/v1/ws` with the built-in viewer at `/`, and the read-only audit API under `/v1` (docs/audit.md)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from bridge import metrics
from bridge.fanout.connection import WebSocketContext
from bridge.forwarded import Network
from bridge.hosts import LOOPBACK_TRUSTED
from bridge.http.audit import AuditContext, add_audit_routes
from bridge.http.security import protect
from bridge.http.server import LISTEN_BACKLOG, make_runner
from bridge.http.ws import add_websocket

STATIC_DIR = Path(__file__).resolve().parent / "static"

ReadinessCheck = Callable[[], Awaitable[dict[str, Any]]]


def coalesced(check: ReadinessCheck, max_age_s: float = 1.0,
              clock: Callable[[], float] = time.monotonic) -> ReadinessCheck:
    """`check`, run at most once per `max_age_s` whatever the probe rate: concurrent callers share the
    run in flight, later ones get its result until it is `max_age_s` old. A probe storm (a load balancer,
    several monitors) then costs the database and the upstream one check per second, not one per probe.
    A run that raises is not kept."""
    last: tuple[float, dict[str, Any]] | None = None
    running: asyncio.Task[dict[str, Any]] | None = None

    async def run() -> dict[str, Any]:
        nonlocal last, running
        if last is not None and clock() - last[0] < max_age_s:
            return last[1]
        if running is None:
            running = asyncio.ensure_future(check())
            task = running

            def done(t: asyncio.Task[dict[str, Any]]) -> None:
                nonlocal last, running
                running = None
                if not t.cancelled() and t.exception() is None:
                    last = (clock(), t.result())

            task.add_done_callback(done)
        return await asyncio.shield(running)

    return run

READINESS_KEY: web.AppKey[ReadinessCheck] = web.AppKey("readiness")


class WorkerSetProbe(Protocol):
    """One of a host's BRIDGE_WORKERS processes answering for its set (bridge.workers.set_state)."""

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        """Whether the set is alive (its parent keeps its state) and what `/livez` says of it."""
        ...

    def metrics_text(self) -> bytes:
        """The set's own series for `/metrics` (workers ready, restarts per worker), Prometheus text."""
        ...


SET_KEY: web.AppKey[WorkerSetProbe] = web.AppKey("worker_set")
# Whether a request may see the checks' error texts (they name database and upstream hosts and users):
# the daemon allows a valid token. Without one the checks show only their `ok` and counters.
DETAIL_KEY: web.AppKey[Callable[[web.Request], bool]] = web.AppKey("readiness_detail")
_DETAIL_FIELDS = frozenset({"error"})


def _redacted(checks: dict[str, Any]) -> dict[str, Any]:
    return {name: {k: v for k, v in check.items() if k not in _DETAIL_FIELDS} if isinstance(check, dict) else check
            for name, check in checks.items()}


async def livez(request: web.Request) -> web.Response:
    # Process alive and the event loop answering; no dependency checks by design. A worker of a set also says
    # whether its parent still runs the set (docs/operations.md "Workers").
    alive, body = request.app[SET_KEY].liveness() if SET_KEY in request.app else (True, {})
    return web.json_response({"status": "ok" if alive else "unavailable", **body}, status=200 if alive else 503)


async def _readiness(app: web.Application) -> tuple[bool, dict[str, Any]]:
    checks = await app[READINESS_KEY]()
    ok = all(bool(v.get("ok")) for v in checks.values())
    metrics.READY.set(1 if ok else 0)
    return ok, checks


async def readyz(request: web.Request) -> web.Response:
    ok, checks = await _readiness(request.app)
    body: dict[str, Any] = {"status": "ok" if ok else "unavailable"}
    if "verbose" in request.query or not ok:
        detail = request.app.get(DETAIL_KEY)
        body["checks"] = checks if detail is not None and detail(request) else _redacted(checks)
    return web.json_response(body, status=200 if ok else 503)


async def metrics_handler(request: web.Request) -> web.Response:
    # bridge_ready for alerting without a second probe (the checks are shared, at most one a second).
    await _readiness(request.app)
    body = metrics.exposition() + (request.app[SET_KEY].metrics_text() if SET_KEY in request.app else b"")
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _add_viewer(app: web.Application) -> None:
    index = STATIC_DIR / "index.html"
    if not index.is_file():
        return

    async def viewer(_request: web.Request) -> web.FileResponse:
        return web.FileResponse(index)

    app.router.add_get("/", viewer)
    app.router.add_static("/static/", STATIC_DIR)


def build_app(readiness: ReadinessCheck, *, websocket: WebSocketContext | None = None,
              audit: AuditContext | None = None, detail: Callable[[web.Request], bool] | None = None,
              trusted_hosts: frozenset[str] | None = None,
              allowed_origins: frozenset[str] | None = None, trusted_proxies: Sequence[Network] = (),
              worker_set: WorkerSetProbe | None = None) -> web.Application:
    """`detail`: who may see /readyz error texts; `trusted_hosts`: the `Host` allow-list; `allowed_origins`:
    who may POST besides the same origin (both default to the WebSocket service's, else loopback only);
    `trusted_proxies`: whose forwarding headers name the client (BRIDGE_TRUSTED_PROXIES); `worker_set`: one of
    a host's workers answers `/livez` and part of `/metrics` for its set (`/readyz`: a check in `readiness`)."""
    app = web.Application()
    app[READINESS_KEY] = readiness
    if worker_set is not None:
        app[SET_KEY] = worker_set
    if detail is not None:
        app[DETAIL_KEY] = detail
    app.router.add_get("/livez", livez)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    if websocket is not None:
        add_websocket(app, websocket)  # every open socket is closed with 1001 at shutdown
        _add_viewer(app)
    if audit is not None:
        add_audit_routes(app, audit)
    if trusted_hosts is None:
        trusted_hosts = websocket.trusted_hosts if websocket is not None else LOOPBACK_TRUSTED
    if allowed_origins is None:
        allowed_origins = websocket.allowed_origins if websocket is not None else frozenset()
    # Security headers on every response, the Host check and the write guard on every request.
    return protect(app, trusted_hosts=trusted_hosts, allowed_origins=allowed_origins,
                   trusted_proxies=trusted_proxies)


@asynccontextmanager
async def serving(app: web.Application, host: str, port: int, *, max_connections: int,
                  sockets: Sequence[socket.socket] = ()) -> AsyncIterator[web.AppRunner]:
    """The app bound to host:port inside the block (at most `max_connections` open, idle keep-alive
    closed, handlers cancelled when their client leaves: bridge.http.server); on the way out sockets are
    closed and handlers end. `sockets`: listening sockets bound already (a worker's, from its parent) instead."""
    runner = make_runner(app, max_connections=max_connections)
    await runner.setup()
    try:
        for sock in sockets:
            await web.SockSite(runner, sock, backlog=LISTEN_BACKLOG).start()
        if not sockets:
            await web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG).start()
        yield runner
    finally:
        await runner.cleanup()
