"""`GET /v1/ws`: the transport of the fan-out protocol (`bridge.fanout`). Frames between the socket and
the client's bounded queue; origin check, token at connect, close at expiry, close codes."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import structlog
from aiohttp import WSMsgType, web
from aiohttp.abc import AbstractStreamWriter

from bridge import metrics as bridge_metrics
from bridge.auth import Claims, bearer_token
from bridge.errors import AuthError
from bridge.fanout import metrics
from bridge.fanout import protocol as p
from bridge.fanout.connection import Connection, WebSocketContext
from bridge.fanout.hub import Client
from bridge.fanout.token_sweep import TokenSweep
from bridge.hosts import origin_allowed
from bridge.http.envelope import error_response, install_envelope
from bridge.http.ws_send import write_queue

FANOUT_KEY: web.AppKey[WebSocketContext] = web.AppKey("fanout")
_SOCKETS_KEY: web.AppKey[set[web.WebSocketResponse[bool]]] = web.AppKey("fanout_sockets")
_SWEEP_KEY: web.AppKey[TokenSweep[Connection]] = web.AppKey("fanout_token_sweep")

ASYNCAPI_PATH = Path(__file__).with_name("asyncapi.json")  # the protocol as AsyncAPI 3 (docs/websocket.md)
HEARTBEAT_S = 30.0
GOING_AWAY_TIMEOUT_S = 5.0  # a 1001 close at shutdown: then the connection is dropped
REVOCATION_CHECK_S = 5.0  # as bridge.revocation.REFRESH_S: how often open sockets' tokens are looked up

_log = structlog.get_logger("bridge.ws")


async def ws_handler(request: web.Request) -> web.StreamResponse:
    svc = request.app[FANOUT_KEY]
    if not origin_allowed(request.headers.get("Origin"), request.headers.get("Host"), svc.allowed_origins,
                          svc.trusted_hosts):
        metrics.WS_REFUSED.labels(reason="bad_origin").inc()
        # Refused before the upgrade: a cross-site page must not even open the socket.
        return error_response(403, "bad_origin", "origin not allowed")
    ws = web.WebSocketResponse(max_msg_size=p.MAX_CLIENT_MESSAGE_BYTES, heartbeat=HEARTBEAT_S)
    stream = await ws.prepare(request)
    try:
        claims = svc.authenticate(bearer_token(request.headers, request.query))
    except AuthError as e:
        # Close codes, not HTTP statuses: a browser cannot see the status of a refused upgrade.
        code = p.CLOSE_TOKEN_EXPIRED if e.code == "expired" else p.CLOSE_UNAUTHORIZED
        metrics.WS_REFUSED.labels(reason=e.code).inc()
        bridge_metrics.TOKENS_REFUSED.labels(reason=e.code).inc()
        metrics.WS_CLOSED.labels(code=str(code)).inc()
        _log.info("ws_refused", reason=e.code)
        await ws.close(code=code, message=e.code.encode())
        return ws
    # A slot is taken only now, after the token was checked: a stranger never holds one (docs/security.md).
    address = request.remote or ""
    refused = svc.slots.acquire(claims.jti, address)
    if refused is not None:
        metrics.WS_REFUSED.labels(reason=f"too_many_connections:{refused}").inc()
        metrics.WS_CLOSED.labels(code=str(p.CLOSE_TRY_AGAIN)).inc()
        _log.info("ws_refused", reason="too_many_connections", per=refused, subject=claims.subject)
        with contextlib.suppress(ConnectionError):
            await ws.send_str(p.dumps(p.error_message(p.ERR_TOO_MANY_CONNECTIONS,
                                                      f"too many open connections (per {refused}): retry later")))
        await ws.close(code=p.CLOSE_TRY_AGAIN, message=b"too_many_connections")
        return ws
    try:
        return await _serve(request, ws, stream, svc, claims)
    finally:
        svc.slots.release(claims.jti, address)


async def _serve(request: web.Request, ws: web.WebSocketResponse, stream: AbstractStreamWriter,
                 svc: WebSocketContext, claims: Claims) -> web.WebSocketResponse:
    sockets = request.app[_SOCKETS_KEY]
    sweep = request.app[_SWEEP_KEY]
    sockets.add(ws)
    metrics.WS_CONNECTIONS.inc()
    client = Client(svc.limits)
    conn = Connection(svc, claims, client)
    _log.info("ws_connected", client=client.id, subject=claims.subject,
              sessions=None if claims.sessions is None else len(claims.sessions))
    try:
        conn.hello()
        async with asyncio.TaskGroup() as tg:
            writer = tg.create_task(write_queue(ws, stream, client), name=f"ws-writer:{client.id}")
            # The token's expiry and revocation: one shared timer for every socket (bridge.fanout.token_sweep).
            sweep.add(conn, claims.jti, claims.expires_at)
            try:
                await _read(ws, conn)
            finally:
                sweep.remove(conn)
                if not writer.done():
                    client.queue.close()
    finally:
        conn.close()
        sockets.discard(ws)
        metrics.WS_CONNECTIONS.dec()
        _log.info("ws_disconnected", client=client.id, close_code=ws.close_code, reason=client.close_reason)
    return ws


async def _read(ws: web.WebSocketResponse, conn: Connection) -> None:
    async for msg in ws:
        if msg.type is WSMsgType.TEXT:
            await conn.handle_text(msg.data)
        elif msg.type is WSMsgType.BINARY:
            conn._send(p.error_message(p.ERR_BAD_MESSAGE, "text frames only"))
        elif msg.type is WSMsgType.ERROR:
            return


def _expired(conn: Connection) -> None:
    conn.client.end("token_expired")


def _revoked(conn: Connection) -> None:
    metrics.WS_REFUSED.labels(reason="revoked").inc()
    conn.client.end("token_revoked")


async def _shutdown(app: web.Application) -> None:
    """Every open socket closed with 1001, all at once, each for at most GOING_AWAY_TIMEOUT_S (docs/websocket.md
    "Deploys"): one after the other, each close waited for its handler's turn on a busy loop (a deploy's
    last 1001 came 24 s after the first at 10,000 clients, BENCHMARKS.md "A deploy"), and a client whose
    connection vanished with a full send buffer held every later 1001, and the exit, back indefinitely."""
    app[_SWEEP_KEY].close()
    sockets: set[web.WebSocketResponse[bool]] = app[_SOCKETS_KEY]
    await asyncio.gather(*(_going_away(ws) for ws in list(sockets)))


async def _going_away(ws: web.WebSocketResponse[bool]) -> None:
    with contextlib.suppress(Exception):  # a timeout included: the cancelled close drops the connection
        await asyncio.wait_for(ws.close(code=p.CLOSE_GOING_AWAY, message=b"shutting down"), GOING_AWAY_TIMEOUT_S)


async def asyncapi(_request: web.Request) -> web.Response:
    return web.Response(body=ASYNCAPI_PATH.read_bytes(), content_type="application/json")


def add_websocket(app: web.Application, service: WebSocketContext) -> None:
    """Mount `/v1/ws` on the bridge's app; every open socket is closed with 1001 on shutdown."""
    app[FANOUT_KEY] = service
    app[_SOCKETS_KEY] = set()
    install_envelope(app)
    # Asks `service.revoked` and `service.now` at each look: either may be replaced after mounting.
    app[_SWEEP_KEY] = TokenSweep(revoked=lambda jti: service.revoked(jti), now=lambda: service.now(),
                                 check_s=REVOCATION_CHECK_S, on_expired=_expired, on_revoked=_revoked)
    app.router.add_get("/v1/ws", ws_handler)
    app.router.add_get("/v1/asyncapi.json", asyncapi)
    app.on_shutdown.append(_shutdown)
