"""HTTP attacks on the audit API, the viewer and /readyz: ids, parameters, tokens in URLs, DNS rebinding,
missing security headers, readiness details for strangers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bridge.config import Secret, Settings
from bridge.fanout.service import FanoutPart
from bridge.hosts import trusted_hosts
from bridge.http.app import build_app
from bridge.http.security import SECURITY_HEADERS, protect, token_holder
from bridge.store.db import make_engine
from bridge.store.writes import EventStore
from tests.support.chat_events import chat_event
from tests.support.fanout_node import SECRET, UPSTREAM

from .conftest import bearer

SID = "ses_audited"


async def stored(store: EventStore, sid: str = SID) -> str:
    epoch, _ = await store.claim(sid, "owner-1")
    await store.write_batch(sid, epoch, [chat_event(1, session_id=sid)], datetime.now(UTC))
    return sid


@pytest.mark.parametrize("path", [
    "/v1/sessions/x%2F..%2Fses_audited", "/v1/sessions/ses_a%00b/events", "/v1/sessions/ses_%ED%A0%80",
    "/v1/sessions/..%2F..%2Fapi/transcript", "/v1/sessions/" + "ses_" + "a" * 300,
])
async def test_a_hostile_session_id_in_the_path_is_400_before_auth(
    audit_api: Callable[..., Any], path: str
) -> None:
    api: TestClient[Any, Any] = await audit_api()
    r = await api.get(path)  # no token at all: the shape is refused first
    assert r.status == 400 and (await r.json())["error"]["code"] == "bad_request"


async def test_a_token_in_the_query_string_is_refused_on_plain_http(
    audit_api: Callable[..., Any], store: EventStore
) -> None:
    await stored(store)
    api: TestClient[Any, Any] = await audit_api()
    token = bearer()["Authorization"].split()[1]
    r = await api.get("/v1/sessions", params={"token": token})
    body = await r.json()
    assert r.status == 401 and "/v1/ws only" in body["error"]["message"]
    assert (await api.get("/v1/sessions", headers=bearer())).status == 200


@pytest.mark.parametrize("params", [
    {"since": "0001-01-01T00:0:00Z"}, {"until": "10000-01-01T00:00:00Z"}, {"until": ""},
    {"since": "2026-02-30T00:00:00Z"},
    {"after": "ses_a:99999999999999999999"}, {"after": "ses_a:\u00b2"}, {"after": "x/..:1"},
    {"session": "ses_a\x00"}, {"session": "../x"}, {"tool": "t" * 5000}, {"limit": "1e3"},
])
async def test_out_of_range_times_and_seqs_are_400_not_500(
    audit_api: Callable[..., Any], params: dict[str, str]
) -> None:
    api: TestClient[Any, Any] = await audit_api()
    r = await api.get("/v1/audit/tool-calls", params=params, headers=bearer())
    assert r.status == 400, await r.text()
    r = await api.get("/v1/sessions", params={k: v for k, v in params.items() if k in ("since", "until")},
                      headers=bearer())
    assert r.status in (200, 400)


@pytest.mark.parametrize("params", [{"since": "0001-01-01T00:00:00+01:00"}, {"until": "9999-12-31T23:59:59-01:00"}])
async def test_a_time_whose_utc_form_leaves_the_years_is_clamped_not_a_500(
    audit_api: Callable[..., Any], params: dict[str, str]
) -> None:
    """Valid by the OpenAPI document's time pattern, beyond year 1 or 9999 once in UTC: the earliest or latest
    time, not a 400 the document could not announce, never a 500."""
    api: TestClient[Any, Any] = await audit_api()
    for path in ("/v1/audit/tool-calls", "/v1/sessions"):
        r = await api.get(path, params=params, headers=bearer())
        assert r.status == 200, await r.text()


async def test_a_seq_beyond_bigint_in_events_or_transcript_is_400(
    audit_api: Callable[..., Any], store: EventStore
) -> None:
    await stored(store)
    api: TestClient[Any, Any] = await audit_api()
    for path in (f"/v1/sessions/{SID}/events", f"/v1/sessions/{SID}/transcript"):
        r = await api.get(path, params={"after": str(2**64)}, headers=bearer())
        assert r.status == 400, path


async def test_dns_rebinding_is_refused_by_the_host_check_in_every_mode(
    audit_api: Callable[..., Any], store: EventStore
) -> None:
    await stored(store)
    app = protect(web.Application(), trusted_hosts=trusted_hosts("127.0.0.1", ["https://chat.example"]))
    api: TestClient[Any, Any] = await audit_api(app=app)
    port = api.port
    r = await api.get("/v1/sessions", headers={"Host": f"evil.example:{port}", **bearer()})
    assert r.status == 403 and (await r.json())["error"]["code"] == "bad_host"
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "chat.example", f"[::1]:{port}", f"10.1.2.3:{port}"):
        r = await api.get("/v1/sessions", headers={"Host": host, **bearer()})
        assert r.status == 200, host


async def test_every_response_carries_csp_nosniff_frame_ancestors_and_no_referrer() -> None:
    url = "postgresql://u:p@127.0.0.1:1/none"  # never connected: only the viewer's static files are served
    fanout = FanoutPart(Settings(upstream_name="up", auth_secret=Secret("k" * 40)), make_engine(url), url,
                    secret="k" * 40)

    async def ready() -> dict[str, Any]:
        return {"started": {"ok": True}}

    app = build_app(ready, websocket=fanout.service)  # the daemon's one app: headers on every response
    async with TestClient(TestServer(app)) as client:
        for path in ("/", "/static/viewer.js", "/livez", "/nope"):
            r = await client.get(path)
            for name, value in SECURITY_HEADERS.items():
                assert r.headers.get(name) == value, (path, name)
        assert "frame-ancestors 'none'" in SECURITY_HEADERS["Content-Security-Policy"]


async def test_readyz_verbose_shows_hosts_and_users_only_to_a_token_holder() -> None:
    leak = "OSError: connect to db.internal:5432 as user bridge failed"

    async def ready() -> dict[str, Any]:
        return {"database": {"ok": False, "error": leak}, "followers": {"ok": True, "warm": 3}}

    app = build_app(ready, detail=token_holder(SECRET, UPSTREAM))
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/readyz?verbose")
        body = await r.text()
        assert r.status == 503 and "db.internal" not in body and "user" not in body
        assert (await r.json())["checks"] == {"database": {"ok": False}, "followers": {"ok": True, "warm": 3}}
        r = await client.get("/readyz?verbose", headers=bearer())
        assert (await r.json())["checks"]["database"]["error"] == leak
