"""bridge.http.routes: the one wrapper and the one authorization helper of every `/v1` route — the path's
session id checked first, the bearer token, widened and required for the path's session, a bound on requests
served at once, every refusal in the one envelope."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.exc import OperationalError

from bridge.auth import Claims, mint_token
from bridge.commands.model import CommandError
from bridge.errors import BadRequest
from bridge.http.envelope import install_envelope
from bridge.http.routes import RouteOptions, TokenGate, json_response, v1_route
from tests.support.commands_twin import OTHER, SID

SECRET, UPSTREAM = "s" * 40, "up"
CHILD = "ses_0000000000000000000000000C"
ENTERED: web.AppKey[asyncio.Event] = web.AppKey("entered", asyncio.Event)
RELEASE: web.AppKey[asyncio.Event] = web.AppKey("release", asyncio.Event)


async def _widen(claims: Claims, sid: str) -> Claims:
    """SID's token grants its subagent CHILD."""
    if sid == CHILD and claims.sessions is not None and SID in claims.sessions:
        return Claims(claims.upstream, claims.sessions | {CHILD}, claims.expires_at, claims.subject,
                      claims.scope, claims.approve, claims.jti)
    return claims


def _auth(sessions: list[str] | None = None) -> dict[str, str]:
    return {"Authorization": "Bearer " + mint_token(SECRET, UPSTREAM, sessions, 600, "alice")}


async def _ok(request: web.Request, claims: Claims) -> web.Response:
    what = request.query.get("fail")
    if what == "bad":
        raise BadRequest("limit must be an integer")
    if what == "db":
        raise OperationalError("SELECT 1", {}, Exception("database away"))
    if what == "command":
        raise CommandError("rate_limited", "slow down", retry_after=2.5)
    if what == "hold":
        request.app[ENTERED].set()
        await request.app[RELEASE].wait()
    return json_response({"subject": claims.subject, "sessions": sorted(claims.sessions or [])})


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    gate = TokenGate(SECRET, UPSTREAM, widen=_widen)
    slot = asyncio.Semaphore(1)
    counted: list[tuple[str, int]] = []
    app = web.Application()
    app[ENTERED], app[RELEASE] = asyncio.Event(), asyncio.Event()
    install_envelope(app)
    app.router.add_get("/v1/things/{session_id}", v1_route("thing", lambda r: gate, _ok, RouteOptions(
        slots=lambda request, name: slot, done=lambda name, status: counted.append((name, status)))))
    app.router.add_get("/v1/open/{session_id}", v1_route("open", lambda r: gate, _ok, RouteOptions(grant=False)))
    app.router.add_get("/v1/any", v1_route("any", lambda r: gate, _ok))
    async with TestClient(TestServer(app)) as http:
        http.counted = counted  # type: ignore[attr-defined]
        yield http


async def _answer(resp: Any) -> tuple[int, Any]:
    return resp.status, await resp.json()


async def test_the_path_session_is_checked_before_the_token(client: Any) -> None:
    status, body = await _answer(await client.get("/v1/things/not-a-session"))
    assert status == 400 and body["error"]["code"] == "bad_request"
    status, body = await _answer(await client.get(f"/v1/things/{SID}"))
    assert status == 401 and body["error"]["code"] == "unauthorized"
    token = mint_token(SECRET, UPSTREAM, None, 600, "alice")
    status, body = await _answer(await client.get(f"/v1/things/{SID}?token={token}"))
    assert status == 401 and "/v1/ws only" in body["error"]["message"]
    status, body = await _answer(await client.get(f"/v1/things/{SID}", headers={"Authorization": "Bearer x.y.z"}))
    assert status == 401


async def test_the_token_must_grant_the_path_session_widened_to_subagents(client: Any) -> None:
    assert (await client.get(f"/v1/things/{SID}", headers=_auth([SID]))).status == 200
    status, body = await _answer(await client.get(f"/v1/things/{OTHER}", headers=_auth([SID])))
    assert status == 403 and body["error"]["code"] == "forbidden"
    status, body = await _answer(await client.get(f"/v1/things/{CHILD}", headers=_auth([SID])))
    assert status == 200 and body["sessions"] == sorted([SID, CHILD])
    # grant=False: the handler (the command door) decides
    assert (await client.get(f"/v1/open/{OTHER}", headers=_auth([SID]))).status == 200
    assert (await client.get("/v1/any", headers=_auth())).status == 200


async def test_refusals_are_the_one_envelope(client: Any) -> None:
    status, body = await _answer(await client.get(f"/v1/things/{SID}?fail=bad", headers=_auth()))
    assert (status, body["error"]["code"]) == (400, "bad_request")
    status, body = await _answer(await client.get(f"/v1/things/{SID}?fail=db", headers=_auth()))
    assert (status, body["error"]["code"]) == (503, "upstream_unavailable")
    assert body["error"]["correlation_id"]
    resp = await client.get(f"/v1/things/{SID}?fail=command", headers=_auth())
    status, body = await _answer(resp)
    assert (status, body["error"]["code"], resp.headers["Retry-After"]) == (429, "rate_limited", "3")
    assert [s for n, s in client.counted] == [400, 503, 429]


async def test_one_request_more_than_the_bound_is_busy_at_once(client: Any) -> None:
    held = asyncio.create_task(client.get(f"/v1/things/{SID}?fail=hold", headers=_auth()))
    try:
        async with asyncio.timeout(5):
            await client.app[ENTERED].wait()  # the held request has the one slot
        status, body = await _answer(await client.get(f"/v1/things/{SID}", headers=_auth()))
        assert (status, body["error"]["code"]) == (503, "busy")
    finally:
        client.app[RELEASE].set()
    assert (await held).status == 200
