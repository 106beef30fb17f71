"""The command door's calls on an OpenCode 2.x serve (`Gen2Commands`), request by request: the bodies of
2.x's source where they differ from 1.x, 1.x's where they agree, and no call at all to a legacy route (an
error naming 2.x instead: those routes answer the web app's page there, which would read as success)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.errors import UpstreamError
from bridge.upstream.client import UpstreamClient
from bridge.upstream.gen2.commands import Gen2Commands
from bridge.upstream.transport import MockTransport, Request, Response, bytes_body
from tests.support.memory_upstream import json_response

SID = "ses_dcf69c6a5ffeHQxvSA7FrlelcL"
DIR = "/srv/p"
LOC = "location%5Bdirectory%5D=%2Fsrv%2Fp"


async def test_the_calls_and_bodies() -> None:
    sent: list[tuple[str, str, Any]] = []
    s = f"/api/session/{SID}"

    async def handler(request: Request) -> Response:
        sent.append((request.method, request.path, json.loads(request.body) if request.body else None))
        if request.path.startswith(f"{s}/prompt"):
            return json_response(200, {"data": {"id": "msg_1", "sessionID": SID, "type": "user", "delivery": "queue"}})
        if request.path == "/api/info":
            return json_response(200, {"version": "2.0.17", "pid": 1, "urls": [], "paths": {"tmp": "/t"}})
        if request.path.startswith("/api/model/default"):
            return json_response(200, {"location": {"directory": DIR}, "data": {"providerID": "mock", "id": "m1"}})
        if request.path.startswith("/api/command"):
            return json_response(200, {"location": {"directory": DIR}, "data": [{"name": "review"}, 3]})
        if request.path.startswith(f"{s}/interrupt"):
            return json_response(200, {"interrupted": False})
        return Response(204, {}, bytes_body())

    async with UpstreamClient("http://serve.test", transport=MockTransport(handler)) as client:
        c = Gen2Commands(client)
        status, data = await c.prompt(SID, DIR, "msg_1", "hi", "queue", [{"uri": "file:///srv/p/a.txt"}])
        assert (status, data["id"]) == (200, "msg_1") and "admittedSeq" not in data
        assert await c.interrupt(SID, DIR) == 200
        assert await c.legacy_busy(SID, DIR) is False and await c.legacy_permissions(DIR) == []
        assert await c.reply_v2(SID, DIR, "per_1", "once") == 204
        assert await c.switch_model(SID, DIR, "mock", "m2") == 204
        assert await c.serve_version() == "2.0.17"
        assert await c.default_model(DIR) == ("mock", "m1")
        assert await c.slash_commands(DIR) == [{"name": "review"}]
    assert sent == [
        ("POST", f"{s}/prompt?{LOC}", {"id": "msg_1", "text": "hi", "delivery": "queue",
                                       "files": [{"uri": "file:///srv/p/a.txt"}]}),
        ("POST", f"{s}/interrupt?{LOC}", None),
        ("POST", f"{s}/permission/per_1/reply?{LOC}", {"reply": "once", "decision": "once"}),
        ("POST", f"{s}/model?{LOC}", {"model": {"providerID": "mock", "id": "m2"}}),
        ("GET", "/api/info", None),
        ("GET", f"/api/model/default?{LOC}", None),
        ("GET", f"/api/command?{LOC}", None),
    ]


@pytest.mark.parametrize("call", ["legacy_abort", "reply_legacy", "legacy_prompt", "legacy_message",
                                  "legacy_recent_user_ids", "legacy_newest_message", "session_op"])
async def test_legacy_calls_are_refused_without_a_request(call: str) -> None:
    sent: list[str] = []

    async def handler(request: Request) -> Response:
        sent.append(request.path)
        return Response(200, {"Content-Type": "text/html"}, bytes_body(b"<!doctype html>"))

    args: dict[str, tuple[Any, ...]] = {
        "legacy_abort": (SID, DIR), "reply_legacy": (DIR, "per_1", "once"), "legacy_prompt": (SID, DIR, {}),
        "legacy_message": (SID, DIR, "msg_1"), "legacy_recent_user_ids": (SID, DIR, 5),
        "legacy_newest_message": (SID, DIR), "session_op": (SID, DIR, "POST", "revert", {})}
    async with UpstreamClient("http://serve.test", transport=MockTransport(handler)) as client:
        with pytest.raises(UpstreamError, match=r"OpenCode 2\.x has no legacy routes") as e:
            await getattr(Gen2Commands(client), call)(*args[call])
    assert e.value.status == 501 and sent == []
