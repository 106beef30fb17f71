"""The fake serve's answers in the real serve's shapes (docs/upstream.md §6, §14), for bench.wire_serve:
the serve model's frames (tests/support/serve_model/frames.py) as aiohttp responses."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tests.support.serve_model import frames
from tests.support.serve_model.frames import MAX_NAMED, Answer

__all__ = ["MAX_NAMED", "answer", "bad_payload", "bad_query", "json_answer", "not_found", "route_name",
           "too_many_named"]


def route_name(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return f"{request.method} {resource.canonical if resource is not None else request.path}"


def json_answer(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


def answer(a: Answer) -> web.Response:
    return json_answer(a[1], a[0])


def not_found(sid: str) -> web.Response:
    return answer(frames.session_not_found(sid))


def bad_query(name: str = "after") -> web.Response:
    return answer(frames.invalid_query(name))


def bad_payload(message: str) -> web.Response:  # the shape of `/sync/history`'s 400 (docs/upstream.md §14)
    return answer(frames.bad_payload(message))


def too_many_named() -> web.Response:  # the real serve's 500 for a body naming more than MAX_NAMED (§14)
    return answer(frames.too_many_named())
