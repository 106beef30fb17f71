"""The one error envelope (docs/errors.md): its pure builders, the code list kept equal to the docs and the
machine-readable documents, and the HTTP edge that puts every `/v1` refusal into it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from bridge.commands.model import CommandError
from bridge.errors import KNOWN_ERROR_CODES, as_error_body, error_body
from bridge.fanout import protocol as p
from bridge.http.envelope import CORRELATION_HEADER
from bridge.http.security import protect

ROOT = Path(__file__).resolve().parents[2]


def _documented_codes() -> set[str]:
    text = (ROOT / "docs" / "errors.md").read_text()
    table = text[text.index("## The codes"):text.index("## For clients")]
    return set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M))


def test_every_code_is_documented_once_and_listed_in_both_documents() -> None:
    text = (ROOT / "docs" / "errors.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)` \| (?:\d|—)", text, flags=re.M)
    assert len(rows) == len(set(rows)), "a code documented twice"
    assert _documented_codes() == set(KNOWN_ERROR_CODES)
    openapi = json.loads((ROOT / "bridge" / "http" / "openapi.json").read_text())
    assert set(openapi["components"]["schemas"]["ErrorCode"]["enum"]) == set(KNOWN_ERROR_CODES)


def test_every_code_the_code_sends_is_known() -> None:
    sent = {v for k, v in vars(p).items() if k.startswith("ERR_")} | set(CommandError.STATUS)
    assert sent <= KNOWN_ERROR_CODES, sent - KNOWN_ERROR_CODES


_text = st.text(max_size=40)


@given(code=st.sampled_from(sorted(KNOWN_ERROR_CODES)), message=_text,
       ref=st.none() | st.text(min_size=1, max_size=16),
       retry=st.none() | st.floats(min_value=0, max_value=3600))
def test_a_body_in_shape_is_kept_and_an_old_flat_one_is_brought_into_it(code: str, message: str, ref: str | None,
                                                                        retry: float | None) -> None:
    body = error_body(code, message, ref, retry)
    assert as_error_body(body) == body
    err = body["error"]
    assert isinstance(err, dict) and err["code"] == code and err["message"] == message
    assert ("correlation_id" in err) == (ref is not None) and ("retry_after" in err) == (retry is not None)
    old: dict[str, Any] = {"error": code, "message": message}
    if ref is not None:
        old["correlation_id"] = ref
    assert as_error_body(old) == error_body(code, message, ref)


@given(st.recursive(st.none() | st.integers() | _text, lambda c: st.lists(c, max_size=3)
                    | st.dictionaries(_text, c, max_size=3), max_leaves=8))
def test_anything_else_becomes_an_internal_error_and_never_raises(junk: object) -> None:
    out = as_error_body(junk)
    err = out["error"]
    assert isinstance(err, dict) and isinstance(err["code"], str) and isinstance(err["message"], str)


def test_the_websocket_frames_carry_the_envelope() -> None:
    frame = p.error_message(p.ERR_BUSY, "wait", 3, "ses_a", retry_after=0.5, correlation_id="c1")
    assert frame["error"] == {"code": "busy", "message": "wait", "correlation_id": "c1", "retry_after": 0.5}
    assert (frame["code"], frame["message"], frame["retry_after"], frame["id"]) == ("busy", "wait", 0.5, 3)
    result = p.command_result_message("prompt", 429, CommandError("rate_limited", "slow", retry_after=1.5).body(), 1)
    assert result["error"] == {"code": "rate_limited", "message": "slow", "retry_after": 1.5}


async def _app_client() -> TestClient[web.Request, web.Application]:
    app = web.Application()

    async def post(_r: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def boom(_r: web.Request) -> web.Response:
        raise RuntimeError("secret detail")

    async def flat(_r: web.Request) -> web.Response:
        r = web.json_response({"error": "conflict", "message": "m"}, status=409)
        r.headers["Retry-After"] = "2"
        return r

    app.router.add_post("/v1/x", post)
    app.router.add_get("/v1/boom", boom)
    app.router.add_get("/v1/flat", flat)
    protect(app)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


async def _check(r: Any, status: int, code: str) -> dict[str, Any]:
    body = await r.json()
    assert (r.status, r.content_type, body["error"]["code"]) == (status, "application/json", code), body
    assert body["error"]["correlation_id"] == r.headers[CORRELATION_HEADER]
    assert isinstance(body["error"]["message"], str)
    return body["error"]  # type: ignore[no-any-return]


async def test_every_refusal_of_the_http_edge_is_in_the_envelope() -> None:
    client = await _app_client()
    try:
        await _check(await client.get("/v1/nothing-here"), 404, "not_found")
        for method in ("TRACE", "PUT", "DELETE", "PATCH"):  # the router's 405, before origin and content type
            r = await client.request(method, "/v1/x")
            await _check(r, 405, "method_not_allowed")
            assert "POST" in r.headers["Allow"]
        await _check(await client.post("/v1/x", data="x"), 415, "unsupported_media_type")
        await _check(await client.post("/v1/x", json={}, headers={"Origin": "https://evil.example"}), 403,
                     "bad_origin")
        await _check(await client.get("/v1/x", headers={"Host": "evil.example"}), 403, "bad_host")
        err = await _check(await client.get("/v1/boom"), 500, "internal")
        assert "secret detail" not in err["message"] and err["correlation_id"] in err["message"]
        r = await client.get("/v1/flat")
        assert await _check(r, 409, "conflict") == {"code": "conflict", "message": "m", "retry_after": 2.0,
                                                    "correlation_id": r.headers[CORRELATION_HEADER]}
        ok = await client.post("/v1/x", json={})
        assert ok.status == 200 and re.fullmatch(r"[0-9a-f]{16}", ok.headers[CORRELATION_HEADER])
        other = await client.get("/livez-not-v1")
        assert other.status == 404 and CORRELATION_HEADER not in other.headers  # outside /v1: aiohttp's own
    finally:
        await client.close()
