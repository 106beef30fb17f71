"""`GET /v1/sessions/{id}/todo` and `…/diff`: the session's todo list and files-changed summary, state the
upstream keeps but never persists in its log (docs/upstream.md §20, docs/commands.md "Session state").

Read through the upstream (`GET /session/{id}/todo|diff`, in the session's directory) on each request, so
the answer is the serve's current state after any reconnect; the shapes are the mapping layer's
(`bridge.events.content`): todos `{content, status, priority}`, files `{file, additions, deletions, status}`
— never a file's contents. Any token that grants the session may read them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from bridge.errors import AuthError, SessionNotFound, UpstreamError
from bridge.events.content import diff_items, todo_items
from bridge.http.commands import COMMANDS_KEY, _authorized, _json, auth_refusal
from bridge.ids import SESSION_ID_RULE, valid_session_id

VIEWS: dict[str, Callable[[object], list[dict[str, Any]]]] = {"todo": todo_items, "diff": diff_items}


def _state_route(what: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        ctx = request.app[COMMANDS_KEY]
        sid = request.match_info["session_id"]
        if not valid_session_id(sid):
            return _json({"error": "bad_request", "message": SESSION_ID_RULE}, 400)
        try:
            claims = _authorized(request, ctx)
            claims.require(sid)
        except AuthError as e:
            return auth_refusal(e)
        try:
            mirrored = await ctx.service.store.session(sid)
            directory = mirrored.directory if mirrored is not None else None
            _, got = await ctx.service.upstream.session_op(sid, directory or "", "GET", what, None)
        except SessionNotFound:
            return _json({"error": "not_found", "message": "no such session upstream"}, 404)
        except (SQLAlchemyError, OSError, UpstreamError):
            return _json({"error": "upstream_unavailable", "message": "the upstream did not answer, retry"}, 503)
        return _json({"data": VIEWS[what](got)}, 200)

    return handler


def add_session_state_routes(app: web.Application) -> None:
    app.router.add_get("/v1/sessions/{session_id}/todo", _state_route("todo"))
    app.router.add_get("/v1/sessions/{session_id}/diff", _state_route("diff"))
