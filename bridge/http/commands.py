"""Command routes under `/v1` (docs/commands.md, `bridge/http/openapi.json`): prompt, interrupt, model,
agent, permission replies, question replies and rejects, session creation, and the session's command list —
the HTTP adapter of the command door (bridge.command_service.door; the daemon builds the door, then these
routes and the WebSocket `command` op on it).

Same tokens as the rest of `/v1`, as `Authorization: Bearer …` only, with the scope each command needs.
Errors are the one envelope `{"error": {"code", "message", "correlation_id", "retry_after"?}}`
(docs/errors.md). Bodies are read with a bound before they are parsed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from bridge.auth import Claims
from bridge.command_service import CommandService, Outcome
from bridge.command_service.directory import session_directory as door_directory
from bridge.command_service.door import run_command
from bridge.commands.model import MAX_BODY_BYTES, MAX_PROMPT_BODY_BYTES, CommandError
from bridge.errors import BadRequest, SessionNotFound, UpstreamError
from bridge.http.envelope import error_response, install_envelope
from bridge.http.routes import RouteOptions, TokenGate, json_response, v1_route
from bridge.ids import SESSION_ID_RULE, valid_session_id
from bridge.revocation import never_revoked

MAX_LIST = 500


class CommandsContext:
    def __init__(self, service: CommandService, secret: str, now: Callable[[], float] = time.time,
                 revoked: Callable[[str], bool] = never_revoked) -> None:
        self.service = service
        # every /v1 route's token check (bridge.http.routes); revoked: bridge.revocation
        self.gate = TokenGate(secret, service.store.upstream, now, revoked, service.widen)

    async def run(self, claims: Claims, name: str, body: object, session_id: str | None = None,
                  request_id: str | None = None) -> Outcome:
        """One command through the door (bridge.command_service.door.run_command)."""
        return await run_command(self.service, claims, name, body, session_id, request_id)


COMMANDS_KEY: web.AppKey[CommandsContext] = web.AppKey("commands", CommandsContext)


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


def gate(request: web.Request) -> TokenGate:
    """The token check of the command and session-state routes (bridge.http.routes.v1_route)."""
    return request.app[COMMANDS_KEY].gate


async def session_directory(ctx: CommandsContext, session_id: str) -> str | None:
    """Where the session lives (bridge.command_service.directory: the mirror's, else the serve's).
    SessionNotFound when the serve has none."""
    return await door_directory(ctx.service.store, ctx.service.upstream, session_id)


def _command(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A command route: the body read with a bound, then the door (whose admission checks the sessions the
    token grants: `grant=False`)."""
    async def handler(request: web.Request, claims: Claims) -> web.Response:
        ctx = request.app[COMMANDS_KEY]
        # a prompt may carry attachments as data: URLs (bridge.commands.attachments)
        body = await _body(request, MAX_PROMPT_BODY_BYTES if name == "prompt" else MAX_BODY_BYTES)
        out = await ctx.run(claims, name, body, request.match_info.get("session_id"),
                            request.match_info.get("request_id"))
        return json_response(out.body, out.status)

    return v1_route(name, gate, handler, RouteOptions(grant=False))


async def list_commands(request: web.Request, claims: Claims) -> web.Response:
    ctx = request.app[COMMANDS_KEY]
    raw = request.query.get("limit", "100")
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIST:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_LIST}")
    rows = await ctx.service.store.for_session(request.match_info["session_id"], int(raw))
    return json_response({"data": rows}, 200)


async def list_slash_commands(request: web.Request, claims: Claims) -> web.Response:
    """`GET /v1/commands[?session=ID]`: the serve's slash commands (upstream `GET /command`), for the
    session's directory when one is named (docs/commands.md "Session commands"). Any valid token."""
    ctx = request.app[COMMANDS_KEY]
    sid = request.query.get("session")
    if sid is not None:
        if not valid_session_id(sid):
            raise BadRequest(SESSION_ID_RULE)
        (await ctx.gate.widened(claims, sid)).require(sid)
    try:
        directory = None if sid is None else await session_directory(ctx, sid)
        listed = await ctx.service.upstream.slash_commands(directory)
    except SessionNotFound:
        return error_response(404, "not_found", "no such session upstream")
    except (SQLAlchemyError, OSError, UpstreamError):
        return error_response(503, "upstream_unavailable", "the upstream did not answer, retry")
    keys = ("name", "description", "agent", "model", "source", "subtask")
    return json_response({"data": [{k: c[k] for k in keys if k in c} for c in listed]}, 200)


_SESSION = "/v1/sessions/{session_id}"
# Every command route (method, path, the door's command name), in the order they are added.
COMMAND_ROUTES = (
    ("POST", "/v1/sessions", "create_session"),
    ("POST", f"{_SESSION}/prompt", "prompt"),
    ("POST", f"{_SESSION}/interrupt", "interrupt"),
    ("POST", f"{_SESSION}/model", "model"),
    ("POST", f"{_SESSION}/agent", "agent"),
    ("POST", f"{_SESSION}/permissions/{{request_id}}/reply", "permission_reply"),
    ("POST", f"{_SESSION}/questions/{{request_id}}/reply", "question_reply"),
    ("POST", f"{_SESSION}/questions/{{request_id}}/reject", "question_reject"),
    # Session commands (bridge.commands.session_ops): rename, undo, fork, slash command.
    ("POST", f"{_SESSION}/title", "title"),
    ("POST", f"{_SESSION}/revert", "revert"),
    ("POST", f"{_SESSION}/unrevert", "unrevert"),
    ("POST", f"{_SESSION}/fork", "fork"),
    ("POST", f"{_SESSION}/command", "slash_command"),
    # Erasure from the mirror (docs/lifecycle.md "Erasure"): the body carries command_id, reason, upstream?.
    ("DELETE", f"{_SESSION}/mirror", "erase"),
)


def add_command_routes(app: web.Application, ctx: CommandsContext) -> None:
    app[COMMANDS_KEY] = ctx
    install_envelope(app)
    for method, path, name in COMMAND_ROUTES:
        app.router.add_route(method, path, _command(name))
    app.router.add_get(f"{_SESSION}/commands", v1_route("commands", gate, list_commands))
    app.router.add_get("/v1/commands", v1_route("slash_commands", gate, list_slash_commands))
