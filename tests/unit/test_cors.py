"""CORS for BRIDGE_ALLOWED_ORIGINS on `/v1` (bridge.http.cors, docs/security.md "CORS"), on a real aiohttp
app behind the bridge's own guards: what a browser on an allowed origin and one on a foreign origin get."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bridge.http.security import protect

ALLOWED = "https://chat.example.com"
FOREIGN = "https://evil.example"
PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}


async def _client(allowed: frozenset[str]) -> TestClient[web.Request, web.Application]:
    app = web.Application()

    async def ok(_r: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def busy(_r: web.Request) -> web.Response:
        return web.json_response({"error": {"code": "busy", "message": "wait"}}, status=503,
                                 headers={"Retry-After": "1"})

    app.router.add_post("/v1/sessions/{sid}/prompt", ok)
    app.router.add_get("/v1/sessions", ok)
    app.router.add_get("/v1/busy", busy)
    protect(app, allowed_origins=allowed)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.fixture
async def http() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    client = await _client(frozenset({ALLOWED}))
    yield client
    await client.close()


def _no_cors(r: web.StreamResponse | object) -> bool:
    headers = r.headers  # type: ignore[attr-defined]
    return not any(h.lower().startswith("access-control-") for h in headers)


async def test_a_preflight_of_an_allowed_origin_gets_the_routes_methods_and_headers(http: TestClient) -> None:
    r = await http.options("/v1/sessions/ses_a/prompt", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert r.status == 204
    assert r.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert r.headers["Access-Control-Allow-Methods"] == "POST"
    assert {h.strip() for h in r.headers["Access-Control-Allow-Headers"].split(",")} == {"Authorization",
                                                                                         "Content-Type"}
    assert int(r.headers["Access-Control-Max-Age"]) > 0 and "Origin" in r.headers["Vary"]
    g = await http.options("/v1/sessions", headers={"Origin": ALLOWED, "Access-Control-Request-Method": "GET"})
    assert (g.status, g.headers["Access-Control-Allow-Methods"]) == (204, "GET")


async def test_an_allowed_origin_reads_answers_and_refusals_with_the_exposed_headers(http: TestClient) -> None:
    r = await http.post("/v1/sessions/ses_a/prompt", json={}, headers={"Origin": ALLOWED})
    assert r.status == 200 and r.headers["Access-Control-Allow-Origin"] == ALLOWED
    exposed = {h.strip() for h in r.headers["Access-Control-Expose-Headers"].split(",")}
    assert exposed == {"Retry-After", "X-Correlation-Id"} and r.headers["Vary"] == "Origin"
    refused = await http.post("/v1/sessions/ses_a/prompt", data="x", headers={"Origin": ALLOWED})
    assert refused.status == 415 and refused.headers["Access-Control-Allow-Origin"] == ALLOWED
    busy = await http.get("/v1/busy", headers={"Origin": ALLOWED})
    assert busy.status == 503 and busy.headers["Access-Control-Allow-Origin"] == ALLOWED


async def test_a_foreign_origin_gets_no_cors_header_and_its_writes_stay_refused(http: TestClient) -> None:
    pre = await http.options("/v1/sessions/ses_a/prompt", headers={"Origin": FOREIGN, **PREFLIGHT})
    assert pre.status == 405 and _no_cors(pre)
    post = await http.post("/v1/sessions/ses_a/prompt", json={}, headers={"Origin": FOREIGN})
    assert post.status == 403 and (await post.json())["error"]["code"] == "bad_origin" and _no_cors(post)
    get = await http.get("/v1/sessions", headers={"Origin": FOREIGN})
    assert get.status == 200 and _no_cors(get) and get.headers["Vary"] == "Origin"
    for origin in ("null", "file://", ALLOWED + ".evil.example"):
        r = await http.options("/v1/sessions/ses_a/prompt", headers={"Origin": origin, **PREFLIGHT})
        assert r.status == 405 and _no_cors(r), origin


async def test_no_preflight_for_a_route_that_does_not_exist_nor_outside_v1(http: TestClient) -> None:
    r = await http.options("/v1/nothing", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert r.status == 404
    r = await http.options("/livez", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert r.status in (404, 405) and _no_cors(r)


async def test_a_wildcard_setting_still_names_the_one_origin_never_star() -> None:
    client = await _client(frozenset({"*"}))
    try:
        r = await client.options("/v1/sessions/ses_a/prompt", headers={"Origin": FOREIGN, **PREFLIGHT})
        assert r.status == 204 and r.headers["Access-Control-Allow-Origin"] == FOREIGN
        r = await client.get("/v1/sessions", headers={"Origin": ALLOWED})
        assert r.headers["Access-Control-Allow-Origin"] == ALLOWED != "*"
    finally:
        await client.close()
