"""The upstream client against an in-memory transport: ids, paths, bounds, credentials, errors."""

from __future__ import annotations

import base64

import pytest

from bridge.errors import BodyTooLarge, InvalidSessionId, SessionNotFound, Unauthorized, UpstreamUnavailable
from bridge.upstream.client import UpstreamClient
from bridge.upstream.transport import MockTransport, Request, Response, bytes_body
from bridge.url_credentials import redact_url
from tests.support.memory_upstream import MemoryUpstream, envelope, json_response
from tests.support.serve_model import FaultPlan

HOSTILE_IDS = ["x/../ses_REAL", "ses_A/../../api/session/ses_B", "ses_A#frag", "ses_A?after=0", "..", "ses_A\x00",
               "ses_%2e%2e", "", "ses_", "ses_A b", "ses_é"]


@pytest.mark.parametrize("sid", HOSTILE_IDS)
async def test_an_id_not_of_the_upstream_shape_is_refused_before_any_request(sid: str) -> None:
    up = MemoryUpstream()
    async with up.client() as client:
        with pytest.raises(InvalidSessionId):
            await client.history(sid, 0)
        with pytest.raises(InvalidSessionId):
            await client.get_session(sid)
        with pytest.raises(InvalidSessionId):
            await client.interrupt(sid)
        with pytest.raises(InvalidSessionId):
            async with client.open_session_events(sid, 0):
                pass
        assert await client.pending_permissions(sid) == []  # "no such session": none pending
    assert up.transport.requests == []


def test_an_invalid_id_is_a_session_not_found() -> None:
    # Callers that stop on a 404 (followers, the permission re-sync) stop on it too, without a request.
    assert issubclass(InvalidSessionId, SessionNotFound)


def test_every_path_segment_is_percent_encoded() -> None:
    path = UpstreamClient.session_path("ses_A", "permission", "per/1?x#y")
    assert path == "/api/session/ses_A/permission/per%2F1%3Fx%23y"


async def test_query_values_are_encoded_and_cannot_add_parameters() -> None:
    async def handler(request: Request) -> Response:
        return json_response(200, {"data": [], "cursor": {"next": None}})

    transport = MockTransport(handler)
    async with UpstreamClient("http://u.test", transport=transport) as client:
        await client.history("ses_A", 7, 3)
    assert transport.requests[0].path == "/api/session/ses_A/history?after=7&limit=3"


async def test_a_history_body_over_the_bound_is_refused_without_reading_it_all() -> None:
    read = []

    async def handler(request: Request) -> Response:
        async def body():  # type: ignore[no-untyped-def]
            for i in range(100):
                read.append(i)
                yield b" " * 1024
        return Response(200, {}, body())

    async with UpstreamClient("http://u.test", transport=MockTransport(handler), max_body_bytes=10 * 1024) as c:
        with pytest.raises(BodyTooLarge) as e:
            await c.history("ses_A", 0)
    assert e.value.limit == 10 * 1024
    assert len(read) <= 11  # stopped at the bound, not at the end of the body


async def test_a_declared_length_over_the_bound_is_refused_before_reading() -> None:
    async def handler(request: Request) -> Response:
        return Response(200, {"Content-Length": str(10**9)}, bytes_body(b"{}"))

    async with UpstreamClient("http://u.test", transport=MockTransport(handler), max_body_bytes=1024) as c:
        with pytest.raises(BodyTooLarge):
            await c.history("ses_A", 0)


async def test_history_pages_come_back_with_has_more() -> None:
    up = MemoryUpstream(history={"ses_A": [envelope("ses_A", s) for s in (1, 2, 3)]})
    async with up.client() as client:
        page = await client.history("ses_A", 0, 2)
        assert [e["durable"]["seq"] for e in page.events] == [1, 2] and page.has_more
        page = await client.history("ses_A", 2, 2)
        assert [e["durable"]["seq"] for e in page.events] == [3] and not page.has_more


async def test_status_codes_map_to_typed_errors() -> None:
    up = MemoryUpstream(history={"ses_A": []}, faults=FaultPlan({"history": 401}))
    async with up.client() as client:
        with pytest.raises(Unauthorized):
            await client.history("ses_A", 0)
        up.fail_status["history"] = 503
        with pytest.raises(UpstreamUnavailable) as e:
            await client.history("ses_A", 0)
        assert e.value.status == 503


async def test_credentials_in_the_url_are_used_as_basic_auth_and_never_kept_in_base_url() -> None:
    async def handler(request: Request) -> Response:
        return json_response(200, {"data": {}})

    transport = MockTransport(handler)
    async with UpstreamClient("http://alice:s3cr%40t@u.test:4096/", transport=transport) as client:
        await client.active()
        assert "s3cr" not in client.base_url and "s3cr" not in repr(client)
    assert client.base_url == "http://u.test:4096"
    sent = transport.requests[0].headers["Authorization"]
    assert base64.b64decode(sent.removeprefix("Basic ")).decode() == "alice:s3cr@t"
    assert "s3cr" not in transport.requests[0].url


def test_redact_url_hides_user_and_password() -> None:
    assert redact_url("http://user:pw@host:4096/x") == "http://***@host:4096/x"
    assert redact_url("https://token@host") == "https://***@host"
    assert redact_url("http://host:4096") == "http://host:4096"


async def test_listed_sessions_of_the_wrong_id_shape_are_left_out() -> None:
    async def handler(request: Request) -> Response:
        return json_response(200, {"data": [{"id": "ses_A"}, {"id": "ses_B\x00"}, {"id": "../ses_A"}, {"id": 5}],
                                   "cursor": {"next": None}})

    async with UpstreamClient("http://u.test", transport=MockTransport(handler)) as client:
        assert [s["id"] for s in await client.list_sessions()] == ["ses_A"]


def test_log_lines_never_carry_url_credentials() -> None:
    from bridge.log import redact_credentials

    event = {"event": "x", "url": "http://opencode:hunter2@serve:4096/api", "error": "GET https://t0k3n@h/x: boom",
             "n": 5, "mail": "someone@example.com"}
    out = redact_credentials(None, "info", dict(event))
    assert out["url"] == "http://***@serve:4096/api" and out["error"] == "GET https://***@h/x: boom"
    assert out["n"] == 5 and out["mail"] == "someone@example.com"


def test_a_refused_upstream_url_is_named_without_its_password() -> None:
    from bridge.config import ConfigError, load_settings

    with pytest.raises(ConfigError) as e:
        load_settings({"BRIDGE_UPSTREAM_URL": "ftp://opencode:hunter2@serve:4096"})
    assert "hunter2" not in str(e.value) and "BRIDGE_UPSTREAM_URL" in str(e.value)
