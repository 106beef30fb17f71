"""The serve model's two adapters answer alike (tests/support/serve_model/): the same scenarios, through
the bridge's own `UpstreamClient`, against the model on a real socket (fake_upstream.py) and behind the
`MockTransport` seam (model_transport.py). What one adapter says of the model, the other says too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bridge.errors import SessionNotFound, UpstreamUnavailable
from bridge.upstream.client import UpstreamClient
from bridge.upstream.transport import Request
from tests.support.fake_upstream import FakeUpstream
from tests.support.serve_model import ServeModel
from tests.support.serve_model.frames import global_frames
from tests.support.serve_model.model_transport import ModelTransport

SID, OTHER = "ses_A", "ses_B"
CAPTURES = Path("fixtures/opencode-1.18.33")


Served = tuple[ServeModel, UpstreamClient, Callable[[], None]]  # the model, a client, "kill the server"


@pytest_asyncio.fixture(params=["socket", "mock_transport"])
async def served(request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    if request.param == "socket":
        fake = FakeUpstream()
        await fake.start()
        try:
            async with UpstreamClient(fake.url) as client:
                yield fake, client, fake.drop_connections
        finally:
            await fake.stop()
    else:
        model = ServeModel()
        adapter = ModelTransport(model)
        async with adapter.client() as client:
            yield model, client, adapter.drop_connections


async def frames(body: AsyncIterator[bytes], n: int) -> list[dict[str, Any]]:
    """The next `n` SSE frames of a stream, decoded (however the transport chunked them)."""
    buf, out = b"", []
    async with asyncio.timeout(5):
        while len(out) < n:
            buf += await anext(body)
            *done, buf = buf.split(b"\n\n")
            out += [json.loads(f[6:]) for f in done if f.startswith(b"data: ")]
    return out


async def test_history_pages_hold_the_durable_events_after_the_cursor_a_hundred_at_most(served: Any) -> None:
    model, client, _ = served
    model.add_session(SID)
    for n in range(150):
        await model.append(SID, "session.next.text.started", {"n": n})
    await model.append_legacy(SID, "session.updated", {"info": {}})  # not on /history (docs/upstream.md §3.1)
    first, rest = await client.history(SID, 0), await client.history(SID, 100)
    assert [e["durable"]["seq"] for e in first.events] == list(range(1, 101)) and first.has_more
    assert [e["durable"]["seq"] for e in rest.events] == list(range(101, 151)) and not rest.has_more
    assert first.events + rest.events == model.sessions[SID].events


async def test_the_sync_log_answers_a_session_after_its_cursor_with_both_runtimes(served: Any) -> None:
    model, client, _ = served
    for sid in (SID, OTHER):
        model.add_session(sid, created=True)
        await model.append(sid, "session.next.text.started", {})
        await model.append_legacy(sid, "message.updated", {"info": {}})
    items = await client.sync_history(SID, 0)
    assert [(i["seq"], i["type"]) for i in items] == [(1, "session.next.text.started.1"), (2, "message.updated.1")]
    assert items == model.sessions[SID].log[1:]
    assert model.sync({SID: 1}) == [model.sessions[SID].log[2], *model.sessions[OTHER].log]  # the rule itself


async def test_the_durable_stream_sends_the_events_after_its_cursor_then_what_comes_and_bad_bytes_once(
        served: Any) -> None:
    model, client, _ = served
    model.add_session(SID)
    for _ in range(3):
        await model.append(SID, "session.next.text.started", {})
    async with client.open_session_events(SID, 2) as body:
        assert [f["durable"]["seq"] for f in await frames(body, 1)] == [3]
        await model.append(SID, "session.next.text.ended", {})
        await model.inject_raw(SID, b'data: {"id":"evt_bad"}\n\n')
        assert [f.get("durable", {}).get("seq") for f in await frames(body, 2)] == [4, None]
    async with client.open_session_events(SID, 3) as body:
        assert [f["durable"]["seq"] for f in await frames(body, 1)] == [4]  # the bad bytes went once
    assert model.sessions[SID].raw_delivered == {0}


async def test_global_event_opens_with_server_connected_then_each_event_and_its_sync_twin(served: Any) -> None:
    model, client, _ = served
    model.add_session(SID)
    async with client.open_global_events() as body:
        assert [f["payload"]["type"] for f in await frames(body, 1)] == ["server.connected"]
        env = await model.append(SID, "session.next.text.started", {})
        got = await frames(body, 2)
    assert got == global_frames({**env}, "/srv/agent/proj")
    assert got[0]["payload"]["properties"]["timestamp"].endswith("Z")  # v2 timestamps as ISO strings


async def test_a_fault_plan_is_obeyed_alike_and_an_unknown_session_is_not_found(served: Any) -> None:
    model, client, _ = served
    model.add_session(SID)
    model.fail_status["history"] = 503
    with pytest.raises(UpstreamUnavailable):
        await client.history(SID, 0)
    del model.fail_status["history"]
    assert (await client.history(SID, 0)).events == []
    with pytest.raises(SessionNotFound):
        await client.history("ses_nobody", 0)
    await model.delete(SID)
    with pytest.raises(SessionNotFound):
        await client.get_session(SID)


async def test_a_paused_global_stream_loses_what_is_published_meanwhile(served: Any) -> None:
    model, client, _ = served
    model.add_session(SID)
    async with client.open_global_events() as body:
        await frames(body, 1)
        model.global_paused = True
        await model.append(SID, "session.next.text.started", {})
        model.global_paused = False
        env = await model.append(SID, "session.next.text.ended", {})
        got = await frames(body, 2)
    assert [f["payload"]["id"] for f in got] == [env["id"]] * 2


async def test_a_killed_server_cuts_every_stream_mid_body(served: Any) -> None:
    model, client, kill = served
    model.add_session(SID)
    await model.append(SID, "session.next.text.started", {})
    async with client.open_global_events() as live, client.open_session_events(SID, 0) as durable:
        await frames(live, 1)
        await frames(durable, 1)
        kill()
        for body in (live, durable):
            with pytest.raises(UpstreamUnavailable):
                await frames(body, 1)


async def exchange(client: UpstreamClient, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request as sent on the wire, through the client's transport; the answer's status and JSON."""
    raw = None if body is None else json.dumps(body).encode()
    async with client.transport.send(Request(method, client.base_url + path, {}, 5.0, 5.0, raw)) as resp:
        return resp.status, json.loads(b"".join([chunk async for chunk in resp.body]))


def capture(rel: str) -> dict[str, Any]:
    exchanged: dict[str, Any] = json.loads((CAPTURES / rel).read_text())
    return exchanged


@pytest.mark.parametrize("rel", ["x9-sync-history/04-sync-history-sid-0.json",
                                 "x9-sync-history/05-sync-history-sid-10.json",
                                 "x9-sync-history/06-sync-history-empty.json",
                                 "j-errors/04-unknown-get-history.json",
                                 "j-errors/11-history-after=abc.json"])
async def test_the_model_answers_the_captured_requests_as_the_real_serve_did(served: Any, rel: str) -> None:
    model, client, _ = served
    whole = capture("x9-sync-history/06-sync-history-empty.json")["response"]["body"]
    sid = whole[0]["aggregate_id"]
    model.add_session(sid).log = whole  # the serve's log, as it answered it whole
    model.add_session("ses_dd5b57e6fffeZ7euAuFrMkcEZR")  # j-errors' session
    asked = capture(rel)
    got = await exchange(client, asked["request"]["method"], asked["request"]["path"], asked["request"]["body"])
    assert got == (asked["response"]["status"], asked["response"]["body"])


async def test_the_plain_reads_show_the_models_sessions_and_pending_requests(served: Any) -> None:
    model, client, _ = served
    model.add_session(SID)
    model.add_session(OTHER)
    await model.delete(OTHER)
    model.active = {SID: {"type": "busy"}}
    model.permissions[SID] = [{"id": "per_1", "sessionID": SID}]
    assert [s["id"] for s in await client.list_sessions()] == [SID]
    assert (await client.get_session(SID))["location"] == {"directory": "/srv/agent/proj"}
    assert await client.active() == {SID: {"type": "busy"}}
    assert await client.pending_permissions(SID) == [{"id": "per_1", "sessionID": SID}]
    model.fail_status["permission"] = 500
    with pytest.raises(UpstreamUnavailable):
        await client.pending_permissions(SID)
