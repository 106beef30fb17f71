"""The one route wrapper and the one authorization helper of every `/v1` HTTP route (docs/security.md
"Tokens", docs/errors.md); the WebSocket (`/v1/ws`, bridge.http.ws) takes its token at the upgrade.

`TokenGate.claims` is the authorization: a token as `Authorization: Bearer …` only (`?token=` is for the
WebSocket: in a URL it ends up in logs), checked (bridge.auth.verify_token: signature, expiry, upstream,
revocation) and, for a session, widened to a parent's subagents (bridge.store.chat_sessions.tree.widen)
and required to grant it. `v1_route` wraps a handler: the path's `{session_id}` checked for shape before
anything (a 400), the token, an optional bound on requests served at once (a 503 `busy`), and every
refusal in the one envelope (bridge.http.envelope): 401/403 for the token, 400 for a bad parameter, the
command's own status for a refused command, 503 when the database does not answer.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog
from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from bridge import metrics
from bridge.auth import Claims, bearer_token, verify_token
from bridge.commands.model import CommandError
from bridge.errors import AuthError, BadRequest, as_error_body
from bridge.http.envelope import auth_refusal, error_response
from bridge.ids import SESSION_ID_RULE, valid_session_id
from bridge.log import correlation_id
from bridge.revocation import never_revoked

_log = structlog.get_logger("bridge.http")
Widen = Callable[[Claims, str], Awaitable[Claims]]
Handler = Callable[[web.Request, Claims], Awaitable[web.Response]]


@dataclass(frozen=True)
class TokenGate:
    """Who may call a `/v1` route: the tokens of this bridge (`secret`) for this upstream."""

    secret: str
    upstream: str
    now: Callable[[], float] = field(default=time.time)
    revoked: Callable[[str], bool] = field(default=never_revoked)  # bridge.revocation
    widen: Widen | None = None  # a parent's token grants its subagents' sessions; None: as is

    def verify(self, request: web.Request) -> Claims:
        """The request's token, checked; AuthError (and a refused-token metric) otherwise."""
        token = bearer_token(request.headers)
        if token is None and "token" in request.query:
            raise AuthError("missing", "?token= is accepted on /v1/ws only: send Authorization: Bearer <token>")
        try:
            return verify_token(token, self.secret, self.upstream, now=self.now(), revoked=self.revoked)
        except AuthError as e:
            metrics.TOKENS_REFUSED.labels(reason=e.code).inc()
            raise

    async def widened(self, claims: Claims, session_id: str) -> Claims:
        if self.widen is not None and not claims.allows(session_id):
            return await self.widen(claims, session_id)
        return claims

    async def claims(self, request: web.Request, session_id: str | None = None) -> Claims:
        """The authorization of every `/v1` route: the token, and with `session_id`, that it grants it
        (widened to subagents first). AuthError (bridge.http.envelope.auth_refusal) otherwise."""
        claims = self.verify(request)
        if session_id is not None:
            claims = await self.widened(claims, session_id)
            claims.require(session_id)
        return claims


def json_default(o: object) -> Any:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def json_response(body: Any, status: int = 200) -> web.Response:
    """A route's answer (datetimes as ISO text); an error body (a stored command row may hold the
    pre-envelope shape) in the envelope, its `retry_after` also as `Retry-After` (bridge.http.envelope)."""
    if status >= 400:
        body = as_error_body(body)
    resp = web.Response(text=json.dumps(body, default=json_default), status=status, content_type="application/json")
    err = body.get("error") if status >= 400 else None
    if isinstance(err, dict) and isinstance(err.get("retry_after"), int | float):
        resp.headers["Retry-After"] = str(max(1, math.ceil(err["retry_after"])))
    elif status == 429:
        resp.headers["Retry-After"] = "1"
    return resp


def database_away(route: str, e: Exception) -> web.Response:
    """503 `upstream_unavailable`: the database (or the serve) did not answer; the default of `v1_route`."""
    ref = correlation_id()
    _log.warning("route_read_failed", route=route, correlation_id=ref, error=f"{type(e).__name__}: {e}"[:300])
    return error_response(503, "upstream_unavailable", f"the database did not answer, retry (correlation id {ref})",
                          correlation_id=ref)


@dataclass(frozen=True)
class RouteOptions:
    """What differs between `/v1` routes, besides the handler."""

    grant: bool = True  # the path's `{session_id}` must be granted before the handler (commands: the door checks)
    # the route's bound on requests served at once (None: none); one more is a 503 `busy` at once
    slots: Callable[[web.Request, str], asyncio.Semaphore | None] | None = None
    unavailable: Callable[[str, Exception], web.Response] = database_away
    done: Callable[[str, int], None] | None = None  # (route, status) of every answer: a metric


def v1_route(name: str, gate: Callable[[web.Request], TokenGate], handler: Handler,
             options: RouteOptions = RouteOptions()) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of a `/v1` route, with its checks and refusals (module docstring)."""

    async def wrapped(request: web.Request) -> web.Response:
        resp = await _answer(request, name, gate(request), handler, options)
        if options.done is not None:
            options.done(name, resp.status)
        return resp

    return wrapped


async def _answer(request: web.Request, name: str, gate: TokenGate, handler: Handler,
                  options: RouteOptions) -> web.Response:
    try:
        sid = request.match_info.get("session_id")
        if sid is not None and not valid_session_id(sid):  # before anything else, the token included
            metrics.BAD_SESSION_IDS.labels(surface="http").inc()
            raise BadRequest(SESSION_ID_RULE)
        claims = await gate.claims(request, sid if options.grant else None)
        slots = None if options.slots is None else options.slots(request, name)
        if slots is None:
            return await handler(request, claims)
        if slots.locked():
            metrics.HTTP_REFUSED.labels(reason=f"busy:{name}").inc()
            return error_response(503, "busy", f"too many {name} requests at once, retry in a moment",
                                  retry_after=1)
        async with slots:
            return await handler(request, claims)
    except AuthError as e:
        return auth_refusal(e)
    except BadRequest as e:
        return error_response(400, "bad_request", str(e))
    except CommandError as e:
        return json_response(e.body(), e.status)
    except (SQLAlchemyError, OSError) as e:  # pool exhausted, statement timeout, database away
        return options.unavailable(name, e)
