"""`GET /v1/sessions/{id}/todo`, `…/diff` and `…/errors`: the session's todo list and files-changed summary,
state the upstream keeps but never persists in its log (docs/upstream.md §20, docs/commands.md "Session
state"), and the session-level errors the bridge recorded (docs/audit.md "Session errors").

Todo and diff are answered from what the bridge keeps (bridge.fanout.live_state: the live events, re-read
after each `/global/event` reconnect and at subscribe); a session this process knows nothing of is asked
of the serve (`GET /session/{id}/todo|diff`, in the session's directory) and the answer kept. The shapes
are the mapping layer's (`bridge.events.content`): todos `{content, status, priority}`, files `{file,
additions, deletions, status}` — never a file's contents. Any token that grants the session may read them
(a token limited to a parent session grants its subagents': bridge.http.routes.TokenGate).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from bridge.auth import Claims
from bridge.errors import SessionNotFound, UpstreamError
from bridge.fanout.frames import STATE_ITEMS
from bridge.fanout.live_state import LiveSessionState
from bridge.http.commands import COMMANDS_KEY, gate, session_directory
from bridge.http.envelope import error_response, install_envelope
from bridge.http.routes import json_response, v1_route
from bridge.store.session_errors import SessionErrorStore


@dataclass(frozen=True)
class SessionStateContext:
    state: LiveSessionState | None = None  # None: ask the serve on every request
    errors: SessionErrorStore | None = None


STATE_KEY: web.AppKey[SessionStateContext] = web.AppKey("session_state", SessionStateContext)


def _state_route(what: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request, claims: Claims) -> web.Response:
        ctx = request.app[COMMANDS_KEY]
        kept = request.app[STATE_KEY].state
        sid = request.match_info["session_id"]  # checked and granted by v1_route
        items = None if kept is None else kept.get(sid, what)
        if items is not None:
            return json_response({"data": items}, 200)
        try:
            directory = await session_directory(ctx, sid)
            _, got = await ctx.service.upstream.session_op(sid, directory or "", "GET", what, None)
        except SessionNotFound:
            return error_response(404, "not_found", "no such session upstream")
        except (SQLAlchemyError, OSError, UpstreamError):
            return error_response(503, "upstream_unavailable", "the upstream did not answer, retry")
        items = STATE_ITEMS[what](got)
        if kept is not None:
            kept.put(sid, what, items)
        return json_response({"data": items}, 200)

    return v1_route(what, gate, handler)


async def session_errors(request: web.Request, claims: Claims) -> web.Response:
    store = request.app[STATE_KEY].errors
    if store is None:
        return json_response({"data": []}, 200)
    return json_response({"data": await store.for_session(request.match_info["session_id"])}, 200)


def add_session_state_routes(app: web.Application, state: LiveSessionState | None = None,
                             errors: SessionErrorStore | None = None) -> None:
    app[STATE_KEY] = SessionStateContext(state, errors)
    install_envelope(app)
    app.router.add_get("/v1/sessions/{session_id}/todo", _state_route("todo"))
    app.router.add_get("/v1/sessions/{session_id}/diff", _state_route("diff"))
    app.router.add_get("/v1/sessions/{session_id}/errors", v1_route("errors", gate, session_errors))
