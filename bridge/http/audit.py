"""Read-only audit and replay API under `/v1` (documented in `bridge/http/openapi.json`).

Same tokens as the WebSocket (bridge.auth), as `Authorization: Bearer …` only (`?token=` is for the
WebSocket: in a URL it ends up in logs); a token scoped to sessions sees only those.
`BRIDGE_AUTH_DISABLED=true` only replaces the secret by one per start (docs/security.md). Every parameter is
checked before it reaches the database: a bad one is a 400, never a 500.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from bridge import metrics
from bridge.audit.transcript import TranscriptBuilder
from bridge.auth import Claims
from bridge.events import SEQ_MAX
from bridge.fanout.frames import stored_question_message
from bridge.http.envelope import error_response, install_envelope
from bridge.http.query_params import query_int, query_session, query_text, query_time, query_tool_cursor
from bridge.http.routes import RouteOptions, TokenGate, json_default, json_response, v1_route
from bridge.log import correlation_id
from bridge.revocation import never_revoked
from bridge.store.reads import AuditReader, SessionFilter, ToolCallFilter

_log = structlog.get_logger("bridge.audit")
OPENAPI_PATH = Path(__file__).with_name("openapi.json")
MAX_LIMIT = 1000
MAX_SEQ = SEQ_MAX  # PostgreSQL bigint


# Requests of one route served at once, whatever the number of clients; one more gets 503 `busy` at once
# (docs/operations.md, "Limits"). The heavy routes get few: they share the small read pool with replay.
ROUTE_CONCURRENCY = {"sessions": 4, "session": 8, "events": 2, "transcript": 1, "tool_calls": 2}
TRANSCRIPT_MAX_EVENTS = 10_000  # per transcript response: bounded memory; `next_after` pages on


@dataclass(frozen=True)
class AuditContext:
    reader: AuditReader
    secret: str
    now: Callable[[], float] = field(default=time.time)
    revoked: Callable[[str], bool] = field(default=never_revoked)  # bridge.revocation
    concurrency: Mapping[str, int] = field(default_factory=lambda: dict(ROUTE_CONCURRENCY))
    _slots: dict[str, asyncio.Semaphore] = field(default_factory=dict, repr=False, compare=False)

    @property
    def gate(self) -> TokenGate:
        return TokenGate(self.secret, self.reader.upstream, self.now, self.revoked, self.reader.widen)

    def slots(self, route: str) -> asyncio.Semaphore | None:
        n = self.concurrency.get(route)
        if n is None:
            return None
        if route not in self._slots:
            self._slots[route] = asyncio.Semaphore(n)
        return self._slots[route]


AUDIT_KEY: web.AppKey[AuditContext] = web.AppKey("audit", AuditContext)


async def _json_list(items: list[Any]) -> str:
    """A JSON array encoded item by item, giving the event loop back every few items: a 10 MB answer
    must not stall ingest and every other client for the whole encode (the loop is shared)."""
    parts = []
    for i, item in enumerate(items):
        parts.append(json.dumps(item, default=json_default))
        if i % 20 == 19:
            await asyncio.sleep(0)
    return "[" + ",".join(parts) + "]"


async def _json_with_list(body: dict[str, Any], path: tuple[str, ...], items: list[Any]) -> web.Response:
    """`body` with `items` placed at `path` (a placeholder there is replaced), encoded with `_json_list`."""
    marker = "\x00items\x00"
    node = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = marker
    head = json.dumps(body, default=json_default)
    return web.Response(text=head.replace(json.dumps(marker), await _json_list(items), 1),
                        content_type="application/json")


def _error(status: int, code: str, message: str) -> web.Response:
    return error_response(status, code, message)


def _busy(message: str, code: str = "busy", ref: str | None = None) -> web.Response:
    return error_response(503, code, message, correlation_id=ref, retry_after=1)


AuditHandler = Callable[[web.Request, AuditContext, Claims], Awaitable[web.Response]]


def _unavailable(name: str, e: Exception) -> web.Response:
    """503 `unavailable` (read pool exhausted, statement timeout, database away), retried in a moment."""
    ref = correlation_id()
    _log.warning("audit_read_failed", route=name, correlation_id=ref, error=f"{type(e).__name__}: {e}"[:300])
    return _busy(f"the database did not answer in time, retry in a moment (correlation id {ref})",
                 code="unavailable", ref=ref)


def _counted(name: str, status: int) -> None:
    metrics.AUDIT_REQUESTS.labels(route=name, status=str(status)).inc()


_OPTIONS = RouteOptions(slots=lambda request, name: request.app[AUDIT_KEY].slots(name), unavailable=_unavailable,
                        done=_counted)


def _route(name: str, handler: AuditHandler) -> Callable[[web.Request], Awaitable[web.Response]]:
    """One audit route through the one `/v1` wrapper (bridge.http.routes): path session, token, bound."""
    async def run(request: web.Request, claims: Claims) -> web.Response:
        return await handler(request, request.app[AUDIT_KEY], claims)

    return v1_route(name, lambda request: request.app[AUDIT_KEY].gate, run, _OPTIONS)


def _scope(claims: Claims) -> frozenset[str] | None:
    return claims.sessions


def _session_id(request: web.Request, claims: Claims) -> str:
    return request.match_info["session_id"]  # shape checked and granted by v1_route


async def list_sessions(request: web.Request, ctx: AuditContext, claims: Claims) -> web.Response:
    limit = query_int(request, "limit", 100, 1, MAX_LIMIT)
    scope = _scope(claims)
    parent = query_session(request, "parent")
    if parent is not None:  # the subagents' sessions of `parent` (docs/audit.md), granted with it
        (await ctx.gate.widened(claims, parent)).require(parent)
        scope = frozenset(await ctx.reader.children(parent))
    f = SessionFilter(status=query_text(request, "status"), since=query_time(request, "since"),
                      until=query_time(request, "until"), after=query_session(request, "after"),
                      sessions=scope, limit=limit)
    rows = await ctx.reader.sessions(f)
    nxt = rows[-1]["session_id"] if len(rows) == limit else None
    return json_response({"data": rows, "next": nxt})


async def get_session(request: web.Request, ctx: AuditContext, claims: Claims) -> web.Response:
    row = await ctx.reader.session(_session_id(request, claims))
    if row is None:
        return _error(404, "not_found", "no such session in the mirror")
    return json_response({"data": row})


async def list_events(request: web.Request, ctx: AuditContext, claims: Claims) -> web.Response:
    sid = _session_id(request, claims)
    after = query_int(request, "after", -1, -1, MAX_SEQ)  # exclusive; -1 (default): from seq 0, `session.created`
    limit = query_int(request, "limit", 100, 1, MAX_LIMIT)
    if await ctx.reader.session(sid) is None:
        return _error(404, "not_found", "no such session in the mirror")
    rows = await ctx.reader.events(sid, after, limit)
    nxt = int(rows[-1]["seq"]) if len(rows) == limit else None
    return await _json_with_list({"data": None, "next_after": nxt}, ("data",), rows)


async def get_transcript(request: web.Request, ctx: AuditContext, claims: Claims) -> web.Response:
    sid = _session_id(request, claims)
    after = query_int(request, "after", 0, 0, MAX_SEQ)
    limit = query_int(request, "limit", TRANSCRIPT_MAX_EVENTS, 1, TRANSCRIPT_MAX_EVENTS)
    if await ctx.reader.session(sid) is None:
        return _error(404, "not_found", "no such session in the mirror")
    # Rows are read page by page and folded into the transcript as they come: at most `limit` events'
    # worth of entries is ever held, never the session's rows.
    builder, count, last = TranscriptBuilder(), 0, after
    async for row in ctx.reader.transcript_rows(sid, after, limit):
        builder.add(row)
        count, last = count + 1, int(row["seq"])
    for q in await ctx.reader.pending_store().questions(sid):
        builder.add_question(stored_question_message(q))
    return await _json_with_list({"data": {"session_id": sid, "events": count, "entries": None},
                                  "next_after": last if count == limit else None},
                                 ("data", "entries"), builder.entries)


async def list_tool_calls(request: web.Request, ctx: AuditContext, claims: Claims) -> web.Response:
    limit = query_int(request, "limit", 100, 1, MAX_LIMIT)
    after = query_tool_cursor(request, "after")
    session = query_session(request, "session")
    if session is not None:
        claims.require(session)
    f = ToolCallFilter(tool=query_text(request, "tool"), session=session, since=query_time(request, "since"),
                       until=query_time(request, "until"), after=after, sessions=_scope(claims), limit=limit)
    rows = await ctx.reader.tool_calls(f)
    nxt = f"{rows[-1]['session_id']}:{rows[-1]['called_seq']}" if len(rows) == limit else None
    return json_response({"data": rows, "next": nxt})


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=OPENAPI_PATH.read_bytes(), content_type="application/json")


def add_audit_routes(app: web.Application, ctx: AuditContext) -> None:
    app[AUDIT_KEY] = ctx
    install_envelope(app)
    app.router.add_get("/v1/openapi.json", openapi)
    app.router.add_get("/v1/sessions", _route("sessions", list_sessions))
    app.router.add_get("/v1/sessions/{session_id}", _route("session", get_session))
    app.router.add_get("/v1/sessions/{session_id}/events", _route("events", list_events))
    app.router.add_get("/v1/sessions/{session_id}/transcript", _route("transcript", get_transcript))
    app.router.add_get("/v1/audit/tool-calls", _route("tool_calls", list_tool_calls))
