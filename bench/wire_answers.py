"""The fake serve's answers in the real serve's shapes (docs/upstream.md §6, §14), for bench.wire_serve."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web


def route_name(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return f"{request.method} {resource.canonical if resource is not None else request.path}"


def json_answer(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


def not_found(sid: str) -> web.Response:
    return json_answer({"_tag": "SessionNotFoundError", "sessionID": sid, "message": f"Session not found: {sid}"}, 404)


def bad_query(message: str) -> web.Response:
    return json_answer({"_tag": "InvalidRequestError", "message": message, "kind": "Query"}, 400)


def bad_payload(message: str) -> web.Response:  # the shape of `/sync/history`'s 400 (docs/upstream.md §14)
    return json_answer({"name": "BadRequest", "data": {"message": message, "kind": "Payload"}}, 400)


MAX_NAMED = 996  # the real serve answers 996 named aggregates and fails a 997th (docs/upstream.md §14)


def too_many_named() -> web.Response:  # the real serve's 500 for a body naming more than MAX_NAMED (§14)
    message = "Expression tree is too large (maximum depth 1000)"
    return json_answer({"name": "UnknownError", "data": {"message": message}}, 500)
