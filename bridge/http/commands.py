"""Command routes under `/v1` (docs/commands.md, `bridge/http/openapi.json`): prompt, interrupt, model,
agent, permission replies, question replies and rejects, session creation, and the session's command list.

Same tokens as the rest of `/v1`, as `Authorization: Bearer …` only, with the scope each command needs.
Errors are the one envelope `{"error": {"code", "message", "correlation_id", "retry_after"?}}`
(docs/errors.md). Bodies are read with a bound before they are parsed.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import structlog
from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import metrics
from bridge.auth import Claims, bearer_token, verify_token
from bridge.command_service import CommandService, DoorSettings, Outcome
from bridge.command_service.directory import session_directory as door_directory
from bridge.command_service.questions import QuestionCommands
from bridge.commands.model import MAX_BODY_BYTES, MAX_PROMPT_BODY_BYTES, CommandError, parse_command
from bridge.config import Settings
from bridge.directories import realpath
from bridge.errors import AuthError, SessionNotFound, UpstreamError, as_error_body, error_body
from bridge.fanout.connection import WebSocketContext
from bridge.http.envelope import auth_refusal, error_response, install_envelope
from bridge.ids import SESSION_ID_RULE, valid_session_id
from bridge.log import correlation_id
from bridge.revocation import never_revoked
from bridge.store.chat_sessions import tree
from bridge.store.commands_pending import CommandStore, PendingStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.commands import UpstreamCommands
from bridge.upstream.requests import UpstreamRequests

_log = structlog.get_logger("bridge.commands")
MAX_LIST = 500


class CommandsContext:
    def __init__(self, service: CommandService, secret: str, now: Callable[[], float] = time.time,
                 revoked: Callable[[str], bool] = never_revoked) -> None:
        self.service = service
        self.secret = secret
        self.now = now
        self.revoked = revoked  # bridge.revocation

    def claims(self, token: str | None) -> Claims:
        return verify_token(token, self.secret, self.service.store.upstream, now=self.now(), revoked=self.revoked)

    async def run(self, claims: Claims, name: str, body: object, session_id: str | None = None,
                  request_id: str | None = None) -> Outcome:
        """One command from any transport (HTTP here, the WebSocket `command` op): an Outcome, errors
        included, never an exception for a refused command."""
        try:
            cmd = parse_command(name, body, session_id, request_id)
            return await self.service.execute(claims, cmd)
        except CommandError as e:
            # Refused before or after its row was written; never the body (prompt text) or the token.
            _log.info("command_refused", command=name, session_id=session_id, subject=claims.subject,
                      scope=claims.scope, error=e.code)
            return Outcome(e.status, e.body())
        except (SQLAlchemyError, OSError) as e:
            ref = correlation_id()
            _log.warning("command_store_failed", command=name, correlation_id=ref,
                         error=f"{type(e).__name__}: {e}"[:300])
            return Outcome(503, error_body("upstream_unavailable",
                                           f"the database did not answer, retry (correlation id {ref})", ref))


COMMANDS_KEY: web.AppKey[CommandsContext] = web.AppKey("commands", CommandsContext)


def _default(o: object) -> Any:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _json(body: dict[str, Any], status: int) -> web.Response:
    """A route's answer; an error body (a stored command row may hold the pre-envelope shape) in the
    envelope, its `retry_after` also as `Retry-After` (bridge.http.envelope)."""
    if status >= 400:
        body = as_error_body(body)
    resp = web.Response(text=json.dumps(body, default=_default), status=status, content_type="application/json")
    err = body.get("error") if status >= 400 else None
    if isinstance(err, dict) and isinstance(err.get("retry_after"), int | float):
        resp.headers["Retry-After"] = str(max(1, math.ceil(err["retry_after"])))
    elif status == 429:
        resp.headers["Retry-After"] = "1"
    return resp


def _fail(status: int, code: str, message: str) -> web.Response:
    return error_response(status, code, message)


async def _body(request: web.Request, limit: int = MAX_BODY_BYTES) -> object:
    if request.content_length is not None and request.content_length > limit:
        raise CommandError("bad_request", f"the body is larger than {limit} bytes")
    raw = bytearray()
    while chunk := await request.content.readany():
        raw += chunk
        if len(raw) > limit:
            raise CommandError("bad_request", f"the body is larger than {limit} bytes")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise CommandError("bad_request", "the body is not JSON") from None


def _authorized(request: web.Request, ctx: CommandsContext) -> Claims:
    token = bearer_token(request.headers)
    if token is None and "token" in request.query:
        raise AuthError("missing", "?token= is accepted on /v1/ws only: send Authorization: Bearer <token>")
    try:
        return ctx.claims(token)
    except AuthError as e:
        metrics.TOKENS_REFUSED.labels(reason=e.code).inc()
        raise


json_response = _json  # the routes' JSON answer (datetimes as ISO text), for the neighbouring route modules


async def session_claims(request: web.Request, ctx: CommandsContext, session_id: str) -> Claims:
    """The request's token, checked to grant `session_id`; a token limited to a parent session grants its
    subagents' sessions too (bridge.store.tree.widen, docs/security.md). Raises AuthError (auth_refusal)."""
    claims = _authorized(request, ctx)
    if ctx.service.widen is not None and not claims.allows(session_id):
        claims = await ctx.service.widen(claims, session_id)
    claims.require(session_id)
    return claims


async def readable_session(request: web.Request, ctx: CommandsContext) -> str | web.Response:
    """The route's `{session_id}` when it is well formed and the token grants it (`session_claims`), else the
    refusal to answer with (400, 401 or 403)."""
    sid = request.match_info["session_id"]
    if not valid_session_id(sid):
        return _fail(400, "bad_request", SESSION_ID_RULE)
    try:
        await session_claims(request, ctx, sid)
    except AuthError as e:
        return auth_refusal(e)
    return sid


async def session_directory(ctx: CommandsContext, session_id: str) -> str | None:
    """Where the session lives: the mirror's directory, else the serve's (`GET /api/session/{id}`
    `location.directory`: a session the mirror has not stored yet). SessionNotFound when the serve has none."""
    return await door_directory(ctx.service.store, ctx.service.upstream, session_id)


def _route(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        ctx = request.app[COMMANDS_KEY]
        sid = request.match_info.get("session_id")
        try:
            if sid is not None and not valid_session_id(sid):
                raise CommandError("bad_request", SESSION_ID_RULE)
            claims = _authorized(request, ctx)
            # a prompt may carry attachments as data: URLs (bridge.commands.attachments)
            body = await _body(request, MAX_PROMPT_BODY_BYTES if name == "prompt" else MAX_BODY_BYTES)
        except AuthError as e:
            return auth_refusal(e)
        except CommandError as e:
            return _json(e.body(), e.status)
        out = await ctx.run(claims, name, body, sid, request.match_info.get("request_id"))
        return _json(out.body, out.status)

    return handler


async def list_commands(request: web.Request) -> web.Response:
    ctx = request.app[COMMANDS_KEY]
    sid = await readable_session(request, ctx)
    if isinstance(sid, web.Response):
        return sid
    raw = request.query.get("limit", "100")
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIST:
        return _fail(400, "bad_request", f"limit must be an integer from 1 to {MAX_LIST}")
    try:
        rows = await ctx.service.store.for_session(sid, int(raw))
    except (SQLAlchemyError, OSError):
        return _fail(503, "upstream_unavailable", "the database did not answer, retry")
    return _json({"data": rows}, 200)


async def list_slash_commands(request: web.Request) -> web.Response:
    """`GET /v1/commands[?session=ID]`: the serve's slash commands (upstream `GET /command`), for the
    session's directory when one is named (docs/commands.md "Session commands"). Any valid token."""
    ctx = request.app[COMMANDS_KEY]
    sid = request.query.get("session")
    try:
        _authorized(request, ctx)
        if sid is not None:
            if not valid_session_id(sid):
                return _fail(400, "bad_request", SESSION_ID_RULE)
            await session_claims(request, ctx, sid)
    except AuthError as e:
        return auth_refusal(e)
    try:
        directory = None if sid is None else await session_directory(ctx, sid)
        listed = await ctx.service.upstream.slash_commands(directory)
    except SessionNotFound:
        return _fail(404, "not_found", "no such session upstream")
    except (SQLAlchemyError, OSError, UpstreamError):
        return _fail(503, "upstream_unavailable", "the upstream did not answer, retry")
    keys = ("name", "description", "agent", "model", "source", "subtask")
    return _json({"data": [{k: c[k] for k in keys if k in c} for c in listed]}, 200)


def add_command_routes(app: web.Application, ctx: CommandsContext) -> None:
    app[COMMANDS_KEY] = ctx
    install_envelope(app)
    app.router.add_post("/v1/sessions", _route("create_session"))
    app.router.add_post("/v1/sessions/{session_id}/prompt", _route("prompt"))
    app.router.add_post("/v1/sessions/{session_id}/interrupt", _route("interrupt"))
    app.router.add_post("/v1/sessions/{session_id}/model", _route("model"))
    app.router.add_post("/v1/sessions/{session_id}/agent", _route("agent"))
    app.router.add_post("/v1/sessions/{session_id}/permissions/{request_id}/reply", _route("permission_reply"))
    app.router.add_post("/v1/sessions/{session_id}/questions/{request_id}/reply", _route("question_reply"))
    app.router.add_post("/v1/sessions/{session_id}/questions/{request_id}/reject", _route("question_reject"))
    app.router.add_get("/v1/sessions/{session_id}/commands", list_commands)
    # Session commands (bridge.commands.session_ops): rename, undo, fork, slash command.
    app.router.add_post("/v1/sessions/{session_id}/title", _route("title"))
    app.router.add_post("/v1/sessions/{session_id}/revert", _route("revert"))
    app.router.add_post("/v1/sessions/{session_id}/unrevert", _route("unrevert"))
    app.router.add_post("/v1/sessions/{session_id}/fork", _route("fork"))
    app.router.add_post("/v1/sessions/{session_id}/command", _route("slash_command"))
    app.router.add_get("/v1/commands", list_slash_commands)
    # Erasure from the mirror (docs/lifecycle.md "Erasure"): the body carries command_id, reason, upstream?.
    app.router.add_delete("/v1/sessions/{session_id}/mirror", _route("erase"))


def mount_commands(app: web.Application, settings: Settings, engine: AsyncEngine, client: UpstreamClient,
                   fanout: WebSocketContext | None, secret: str,
                   revoked: Callable[[str], bool] = never_revoked, *,
                   upstream: UpstreamCommands | None = None,
                   requests: UpstreamRequests | None = None) -> CommandsContext:
    """The command routes on `app` and, given the fan-out, the WebSocket `command` op (the daemon's wiring).
    `engine` is the writers' pool: a command writes its row before and after the upstream call. `upstream`:
    the calls of the serve's generation (default: 1.x's; docs/upstream.md §24)."""
    questions = QuestionCommands(PendingStore(engine, settings.upstream_name), requests or UpstreamRequests(client))
    def widen(claims: Claims, session_id: str) -> Awaitable[Claims]:
        return tree.widen(claims, engine, settings.upstream_name, session_id)

    door = DoorSettings(directories=settings.directory_roots, resolve=realpath,
                        prompt_runtime=settings.prompt_runtime)
    service = CommandService(CommandStore(engine, settings.upstream_name), upstream or UpstreamCommands(client),
                             door, questions=questions, widen=widen)
    ctx = CommandsContext(service, secret, revoked=revoked)
    add_command_routes(app, ctx)
    if fanout is not None:
        fanout.commands = ctx.run
        fanout.widen = widen
    return ctx
