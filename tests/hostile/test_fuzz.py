"""Fuzzing (hypothesis): any WebSocket frame gets a documented answer on a connection that stays usable
and creates no state; any audit query or path gets 200/4xx, never a 500."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_from_bytes

import aiohttp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine
from yarl import URL

from bridge.store.writes import EventStore
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node

from .conftest import bearer, session_rows
from .test_ws_attacks import HOSTILE_IDS

KNOWN = "ses_fuzz_known"
# docs/websocket.md §2.2: every server message type, and the error codes a client frame can cause.
TYPES = {"hello", "subscribed", "event", "caught_up", "delta", "permission", "status", "sessions",
         "unsubscribed", "pong", "error"}
# `rate_limited` too: 300 examples of two ops each outrun 50 ops a second after the burst of 200 whenever the
# machine answers fast; the held ops are still answered in turn (docs/websocket.md, the error table).
CLIENT_ERRORS = {"bad_message", "forbidden", "too_many_subscriptions", "not_subscribed", "unknown_session",
                 "rate_limited"}

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                     st.text(max_size=30))
_json = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=12)
_ids = st.one_of(st.sampled_from([KNOWN, "ses_unknown_1", *HOSTILE_IDS]), st.text(max_size=40))
_ops = st.fixed_dictionaries(
    {"op": st.sampled_from(["subscribe", "unsubscribe", "ping", "sessions", "dance", 5, None])},
    optional={"session": st.one_of(_ids, _json), "after": st.one_of(st.integers(-5, 2**66), _json),
              "id": _json, "limit": st.one_of(st.integers(-5, 1000), _json), "next": _json},
)


def _frame(value: Any) -> str:
    return json.dumps(value, allow_nan=True)  # ASCII: lone surrogates travel as escapes


_frames = st.one_of(
    _ops.map(_frame),
    _json.map(_frame),
    st.text(max_size=200),  # not JSON at all
    st.sampled_from(["[" * 5000, '{"op":"ping","id":NaN}', '{"op":"subscribe","session":"ses_a","after":1e400}',
                     '{"op":"subscribe","session":"\\ud800"}', '{"op":"ping","id":"\\udfff"}', "\ufeff{}",
                     '{"op":"ping"} trailing']),
)


async def test_any_websocket_frame_gets_a_documented_answer_and_creates_nothing(
    nodes: Callable[..., Any], clients: list[WsClient], engine: AsyncEngine
) -> None:
    async def upstream_knows_nothing(_sid: str) -> bool:
        return False

    node: Node = await nodes(confirm=upstream_knows_nothing)
    await node.write_seqs(KNOWN, 1, 2)
    c = await WsClient.connect(node.url, node.token())
    clients.append(c)
    await c.wait_for("hello")
    loop = asyncio.get_running_loop()
    fences = iter(range(10**9))

    async def exchange(frame: str | bytes) -> list[dict[str, Any]]:
        before = len(c.messages)
        await (c.ws.send_bytes(frame) if isinstance(frame, bytes) else c.ws.send_str(frame))
        ref = f"fence-{next(fences)}"
        await c.send(op="ping", id=ref)
        await c.wait_for("pong", id=ref)
        assert c.close_code is None
        return c.messages[before:]

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(frame=st.one_of(_frames, st.binary(max_size=50)))
    def check(frame: str | bytes) -> None:
        got = asyncio.run_coroutine_threadsafe(exchange(frame), loop).result(30)
        for m in got:
            assert m["type"] in TYPES, m
            if m["type"] == "error":
                assert m["code"] in CLIENT_ERRORS, (frame, m)
            if m["type"] in ("subscribed", "event", "caught_up"):
                assert m["session"] == KNOWN, (frame, m)

    await asyncio.to_thread(check)
    assert set(node.warmed) <= {KNOWN}
    assert await session_rows(engine) == [KNOWN]


_raw = st.one_of(st.binary(max_size=30).map(lambda b: quote_from_bytes(b, safe="")),
                 st.text(max_size=30).map(lambda t: quote_from_bytes(t.encode("utf-8", "surrogatepass"), safe="")),
                 st.sampled_from(["0001-01-01T00:00:00%2B01:00", "9999-12-31T23:59:59-01:00", "ses_a%3A1",
                                  "ses_a%3A99999999999999999999", "-1", "1e3", "%00", "%ED%A0%80", "2" * 30]))
_params = st.dictionaries(st.sampled_from(["status", "since", "until", "after", "limit", "tool", "session",
                                           "token", "verbose"]), _raw, max_size=4)


async def test_any_audit_query_or_path_gets_200_or_4xx_never_500(
    audit_api: Callable[..., Any], store: EventStore
) -> None:
    epoch, _ = await store.claim(KNOWN, "owner-1")
    from tests.support.chat_events import RECEIVED_AT, chat_event

    await store.write_batch(KNOWN, epoch, [chat_event(1, session_id=KNOWN)], RECEIVED_AT)
    api = await audit_api()
    base = str(api.make_url("")).rstrip("/")
    loop = asyncio.get_running_loop()
    paths = ["/v1/sessions", "/v1/sessions/{}", "/v1/sessions/{}/events", "/v1/sessions/{}/transcript",
             "/v1/audit/tool-calls"]

    async def call(url: str, authed: bool) -> tuple[int, str]:
        async with aiohttp.ClientSession() as http, http.get(
                URL(url, encoded=True), headers=bearer() if authed else {}) as r:
            return r.status, await r.text()

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(path=st.sampled_from(paths), sid=st.one_of(st.just(KNOWN), _raw), params=_params,
           authed=st.booleans())
    def check(path: str, sid: str, params: dict[str, str], authed: bool) -> None:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        url = base + path.format(sid or "x") + ("?" + query if query else "")
        status, body = asyncio.run_coroutine_threadsafe(call(url, authed), loop).result(30)
        assert status in (200, 400, 401, 403, 404), (url, status, body)
        assert "Traceback" not in body
        if status != 404:  # the router's own 404 (a path no route matches) is plain text
            json.loads(body)  # every other answer, refusals included, is JSON

    await asyncio.to_thread(check)
