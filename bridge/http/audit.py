"""Read-only audit and replay API under `/v1` (documented in `bridge/http/openapi.json`).

Same tokens as the WebSocket (bridge.auth): `Authorization: Bearer …` or `?token=`; a token scoped to
sessions sees only those. `BRIDGE_AUTH_DISABLED=true` (local development) skips the check.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from bridge import metrics
from bridge.audit.transcript import build_transcript
from bridge.auth import Claims, bearer_token, verify_token
from bridge.errors import AuthError, BadRequest
from bridge.store.audit import AuditReader, SessionFilter, ToolCallFilter

OPENAPI_PATH = Path(__file__).with_name("openapi.json")
MAX_LIMIT = 1000


@dataclass(frozen=True)
class AuditContext:
    reader: AuditReader
    secret: str
    auth_disabled: bool = False
    now: Callable[[], float] = field(default=time.time)


AUDIT_KEY: web.AppKey[AuditContext] = web.AppKey("audit", AuditContext)


def _default(o: object) -> Any:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body, default=_default), status=status, content_type="application/json")


def _error(status: int, code: str, message: str) -> web.Response:
    return _json({"error": {"code": code, "message": message}}, status)


def _int(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer") from None
    if not lo <= v <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return v


def _text(request: web.Request, name: str) -> str | None:
    raw = request.query.get(name)
    if not raw:
        return None
    if "\x00" in raw:  # PostgreSQL text cannot hold NUL: refuse instead of failing in the driver
        raise BadRequest(f"{name} must not contain NUL")
    return raw


def _time(request: web.Request, name: str) -> datetime | None:
    raw = request.query.get(name)
    if not raw:
        return None
    try:
        t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"{name} must be an ISO 8601 time, e.g. 2026-11-30T03:00:00Z") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


Handler = Callable[[web.Request, AuditContext, Claims | None], Awaitable[web.Response]]


def _route(name: str, handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def wrapped(request: web.Request) -> web.Response:
        ctx = request.app[AUDIT_KEY]
        try:
            claims = _authorize(request, ctx)
            resp = await handler(request, ctx, claims)
        except AuthError as e:
            resp = _error(403 if e.code == "forbidden" else 401, e.code, str(e))
        except BadRequest as e:
            resp = _error(400, "bad_request", str(e))
        metrics.AUDIT_REQUESTS.labels(route=name, status=str(resp.status)).inc()
        return resp

    return wrapped


def _authorize(request: web.Request, ctx: AuditContext) -> Claims | None:
    if ctx.auth_disabled:
        return None
    token = bearer_token(request.headers, request.query)
    return verify_token(token, ctx.secret, ctx.reader.upstream, now=ctx.now())


def _scope(claims: Claims | None) -> frozenset[str] | None:
    return None if claims is None else claims.sessions


def _session_id(request: web.Request, claims: Claims | None) -> str:
    sid = request.match_info["session_id"]
    if "\x00" in sid:
        raise BadRequest("session id must not contain NUL")
    if claims is not None:
        claims.require(sid)
    return sid


async def list_sessions(request: web.Request, ctx: AuditContext, claims: Claims | None) -> web.Response:
    limit = _int(request, "limit", 100, 1, MAX_LIMIT)
    f = SessionFilter(status=_text(request, "status"), since=_time(request, "since"),
                      until=_time(request, "until"), after=_text(request, "after"),
                      sessions=_scope(claims), limit=limit)
    rows = await ctx.reader.sessions(f)
    nxt = rows[-1]["session_id"] if len(rows) == limit else None
    return _json({"data": rows, "next": nxt})


async def get_session(request: web.Request, ctx: AuditContext, claims: Claims | None) -> web.Response:
    row = await ctx.reader.session(_session_id(request, claims))
    if row is None:
        return _error(404, "not_found", "no such session in the mirror")
    return _json({"data": row})


async def list_events(request: web.Request, ctx: AuditContext, claims: Claims | None) -> web.Response:
    sid = _session_id(request, claims)
    after = _int(request, "after", 0, 0, 2**53)
    limit = _int(request, "limit", 100, 1, MAX_LIMIT)
    if await ctx.reader.session(sid) is None:
        return _error(404, "not_found", "no such session in the mirror")
    rows = await ctx.reader.events(sid, after, limit)
    nxt = int(rows[-1]["seq"]) if len(rows) == limit else None
    return _json({"data": rows, "next_after": nxt})


async def get_transcript(request: web.Request, ctx: AuditContext, claims: Claims | None) -> web.Response:
    sid = _session_id(request, claims)
    if await ctx.reader.session(sid) is None:
        return _error(404, "not_found", "no such session in the mirror")
    rows = [r async for r in ctx.reader.all_events(sid)]
    return _json({"data": {"session_id": sid, "events": len(rows), "entries": build_transcript(rows)}})


async def list_tool_calls(request: web.Request, ctx: AuditContext, claims: Claims | None) -> web.Response:
    limit = _int(request, "limit", 100, 1, MAX_LIMIT)
    after: tuple[str, int] | None = None
    raw_after = _text(request, "after")
    if raw_after:
        sid, _, seq = raw_after.rpartition(":")
        if not sid or not seq.isdigit():
            raise BadRequest("after must be '<session_id>:<seq>' as returned in next")
        after = (sid, int(seq))
    session = _text(request, "session")
    if session is not None and claims is not None:
        claims.require(session)
    f = ToolCallFilter(tool=_text(request, "tool"), session=session, since=_time(request, "since"),
                       until=_time(request, "until"), after=after, sessions=_scope(claims), limit=limit)
    rows = await ctx.reader.tool_calls(f)
    nxt = f"{rows[-1]['session_id']}:{rows[-1]['called_seq']}" if len(rows) == limit else None
    return _json({"data": rows, "next": nxt})


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=OPENAPI_PATH.read_bytes(), content_type="application/json")


def add_audit_routes(app: web.Application, ctx: AuditContext) -> None:
    app[AUDIT_KEY] = ctx
    app.router.add_get("/v1/openapi.json", openapi)
    app.router.add_get("/v1/sessions", _route("sessions", list_sessions))
    app.router.add_get("/v1/sessions/{session_id}", _route("session", get_session))
    app.router.add_get("/v1/sessions/{session_id}/events", _route("events", list_events))
    app.router.add_get("/v1/sessions/{session_id}/transcript", _route("transcript", get_transcript))
    app.router.add_get("/v1/audit/tool-calls", _route("tool_calls", list_tool_calls))
